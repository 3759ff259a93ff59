// The audit's supplier checks in a market held apart (audit-apart.ts calls them): the
// supplier's hash, offers set, upstream key claims and payouts are on the market's slot, each
// offer (its earnings, its fills) on its own. A supplier's offers set is the offers that name it
// (one listed but not written yet is a create the reaper finishes or undoes); what it was paid and
// has pending is at most what its offers earned, which their fills add up to; every claimed
// upstream key belongs to an offer standing, or to one whose create or change the reaper places.

import { keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { sumOfField } from '../redis/streams.ts'
import type { AuditFinding } from './audit.ts'

/** `offers`: every offer hash in the market, as the audit read them from their own slots. */
export async function auditSuppliersApart(
  store: Store,
  prefix: string,
  offers: Record<string, string>[],
): Promise<AuditFinding[]> {
  const keys = keyspace(prefix, 'apart')
  const findings: AuditFinding[] = []
  const byId = new Map(offers.map((o) => [o.id!, o]))
  // Offers whose create or change has not been placed yet: `<offer id>:<supplier id>`.
  const listing = new Set(
    (await store.zrange(keys.offersListing, 0, -1)).map((m) => m.slice(0, m.indexOf(':'))),
  )
  const named = new Map<string, Set<string>>()
  for (const o of offers) {
    if (!o.supplierId) continue
    const set = named.get(o.supplierId) ?? new Set()
    named.set(o.supplierId, set.add(o.id!))
  }

  for (const id of await store.smembers(keys.suppliers)) {
    const off = (problem: string) => findings.push({ subject: `supplier ${id}`, problem })
    const row = await store.hgetall(keys.supplier(id))
    const listed = new Set(await store.smembers(keys.supplierOffers(id)))
    let earned = 0
    let fills = 0
    let complete = true
    for (const offerId of listed) {
      const o = byId.get(offerId)
      if (!o) {
        if (!listing.has(offerId)) off(`offer ${offerId} is in its offers but was never written`)
        continue
      }
      if (o.supplierId !== id) off(`offer ${offerId} in its offers names supplier ${o.supplierId ?? 'none'}`)
      earned += Number(o.earned ?? 0)
      const stream = await sumOfField(store, keys.offerFills(offerId, id), 'earnedUsdc')
      fills += stream.sum
      complete &&= stream.complete
    }
    for (const offerId of named.get(id) ?? [])
      if (!listed.has(offerId)) off(`offer ${offerId} names it but is not in its offers`)
    if (complete && fills !== earned) off(`fills earned ${fills} != its offers' earned ${earned}`)
    const paid = Number(row.paidOut ?? 0) + Number(row.pending ?? 0)
    if (paid > earned) off(`paid out and pending ${paid} exceed its offers' earned ${earned}`)
  }

  const claims = await store.hgetall(keys.upstreamKeys)
  for (const [digest, offerId] of Object.entries(claims)) {
    const o = byId.get(offerId)
    const standing = o && o.status !== 'deleted' && o.upstreamKeyDigest === digest
    if (!standing && !listing.has(offerId))
      findings.push({
        subject: `upstream key ${digest.slice(0, 12)}`,
        problem: `claimed by offer ${offerId}, which ${o ? `is ${o.status}` : 'was never written'}`,
      })
  }
  return findings
}
