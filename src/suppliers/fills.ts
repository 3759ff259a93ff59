// GET /v1/supplier/fills: the clears on a supplier's offers, newest first, read from its fills
// Stream (`supplier:<id>:fills`, appended by lua/clear.lua in the call that clears). Offer, model,
// burn, price and earnings only: a fill never names the buyer.
import { formatMicros } from '../money/units.ts'
import { type Entry, entryMs, fieldsOf, pageStream } from '../records/activity.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

function fillItem([id, flat]: Entry) {
  const f = fieldsOf(flat)
  return {
    createdAt: new Date(entryMs(id)).toISOString(),
    model: f.model || null,
    offerId: f.offer ?? '',
    burnDiem: formatMicros(Number(f.burnDiem ?? 0)),
    clearingPriceCents: Number(f.askCents ?? 0),
    earnedUsdc: formatMicros(Number(f.earnedUsdc ?? 0)),
  }
}

export function listFills(
  store: Store,
  keys: Keyspace,
  supplierId: string,
  limit: number,
  before: string | null,
) {
  return pageStream(store, keys.supplierFills(supplierId), limit, before, fillItem)
}
