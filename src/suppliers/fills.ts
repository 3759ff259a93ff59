// GET /v1/supplier/fills: the clears on a supplier's offers, newest first, read from its fills
// Streams (`supplier:<id>:fills`, appended by the script that clears: lua/clear.lua on one slot,
// lua/post.lua on each offer's own slot when the market is held apart, so one Stream per offer
// then, merged here). Offer, model, burn, price and earnings only: a fill never names the buyer.
import { formatMicros } from '../money/units.ts'
import { type Entry, entryMs, fieldsOf, pageEnd, pageStream, retainedFrom } from '../records/activity.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

/**
 * When a fill's clear was, where its entry says (held apart, a fill posted in a later hour than
 * its clear: lua/lib/posts.lua); undefined for one written with its clear (or by an earlier build).
 */
export function clearedAt(f: Record<string, string>): number | undefined {
  if (f.clearedAt === undefined || !/^\d{1,15}$/.test(f.clearedAt)) return undefined
  return Number(f.clearedAt)
}

function fillItem([id, flat]: Entry) {
  const f = fieldsOf(flat)
  const at = clearedAt(f)
  return {
    createdAt: new Date(at !== undefined && at < entryMs(id) ? at : entryMs(id)).toISOString(),
    model: f.model || null,
    offerId: f.offer ?? '',
    burnDiem: formatMicros(Number(f.burnDiem ?? 0)),
    clearingPriceCents: Number(f.askCents ?? 0),
    earnedUsdc: formatMicros(Number(f.earnedUsdc ?? 0)),
  }
}

/** The Streams a supplier's fills are on: its own, or held apart, one on each of its offers' slots. */
export async function fillStreams(store: Store, keys: Keyspace, supplierId: string): Promise<string[]> {
  if (keys.layout !== 'apart') return [keys.supplierFills(supplierId)]
  const offerIds = await store.smembers(keys.supplierOffers(supplierId))
  return offerIds.map((offerId) => keys.offerFills(offerId, supplierId))
}

/** Stream entry ids in order, newest first. */
function newestFirst(a: Entry, b: Entry): number {
  const [aMs, aSeq] = a[0].split('-').map(Number) as [number, number]
  const [bMs, bSeq] = b[0].split('-').map(Number) as [number, number]
  return bMs - aMs || bSeq - aSeq
}

export async function listFills(
  store: Store,
  keys: Keyspace,
  supplierId: string,
  limit: number,
  before: string | null,
  retentionMs: number = DEFAULT_RECORD_RETENTION_MS,
) {
  const streams = await fillStreams(store, keys, supplierId)
  // Within the record retention only: the Streams' MINID ~ trim may have left older fills.
  const oldest = await retainedFrom(store, retentionMs)
  if (keys.layout !== 'apart') return pageStream(store, streams[0]!, limit, before, fillItem, oldest)
  const end = pageEnd(before)
  if (end === null) return { object: 'list' as const, data: [], nextCursor: null }
  // Each offer's newest page below the cursor, merged: the newest `limit` of them all are among them.
  const pages = await Promise.all(
    streams.map((stream) => store.xrevrange(stream, end, oldest, 'COUNT', limit + 1) as Promise<Entry[]>),
  )
  const entries = pages.flat().sort(newestFirst)
  let page = entries.slice(0, limit)
  // Two offers' fills may share an id; a page never ends between them, or the cursor would skip one.
  if (entries.length > limit) {
    const cut = entries[limit]![0]
    const before = page.filter(([id]) => id !== cut)
    page = before.length > 0 ? before : entries.filter(([id]) => id === cut)
  }
  const more = entries.length > page.length
  return { object: 'list' as const, data: page.map(fillItem), nextCursor: more ? page.at(-1)![0] : null }
}
