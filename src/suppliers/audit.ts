// The audit's supplier checks (composed by `svc-gateway audit`, cli/audit.ts): per supplier,
// every offer it posted names it, its fills add up to its offers' earnings (equal while its fills
// Stream holds every entry it was given, at most that once retention trimmed it), and earned =
// paid out + pending + payable with payable never below zero.
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { sumOfField } from '../redis/streams.ts'
import { fillStreams } from './fills.ts'

export interface SupplierFinding {
  subject: string
  problem: string
}

export async function auditSuppliers(store: Store, keys: Keyspace): Promise<SupplierFinding[]> {
  const findings: SupplierFinding[] = []
  for (const id of await store.smembers(keys.suppliers)) {
    const subject = `supplier ${id}`
    const off = (problem: string) => findings.push({ subject, problem })
    const row = await store.hgetall(keys.supplier(id))
    if (!row.id) {
      off('listed in suppliers but has no hash')
      continue
    }
    const offerIds = await store.smembers(keys.supplierOffers(id))
    let earned = 0
    for (const offerId of offerIds) {
      const [owner, offerEarned] = await store.hmget(keys.offer(offerId), 'supplierId', 'earned')
      // Held apart, an offer listed and not yet written is a create the reaper finishes or undoes,
      // which audit-suppliers.ts tells from one never written.
      const listedOnly = keys.layout === 'apart' && owner === null
      if (owner !== id && !listedOnly) off(`offer ${offerId} in its offers names supplier ${owner ?? 'none'}`)
      earned += Number(offerEarned ?? 0)
    }
    const fills = { sum: 0, complete: true }
    for (const stream of await fillStreams(store, keys, id)) {
      const one = await sumOfField(store, stream, 'earnedUsdc')
      fills.sum += one.sum
      fills.complete &&= one.complete
    }
    if (fills.complete && fills.sum !== earned)
      off(`fills earned ${fills.sum} != its offers' earned ${earned}`)
    if (!fills.complete && fills.sum > earned) {
      off(`its retained fills' earned ${fills.sum} exceeds its offers' earned ${earned}`)
    }
    const paidOut = Number(row.paidOut ?? 0)
    const pending = Number(row.pending ?? 0)
    for (const [field, value] of [
      ['paidOut', paidOut],
      ['pending', pending],
    ] as const) {
      if (!Number.isSafeInteger(value) || value < 0)
        off(`${field} is not a whole amount at or above zero: ${value}`)
    }
    const payable = earned - paidOut - pending
    if (payable < 0)
      off(`payable ${payable} is below zero (earned ${earned}, paid out ${paidOut}, pending ${pending})`)
    if ((await store.hget(keys.supplierWallets, (row.wallet ?? '').toLowerCase())) !== id) {
      off(`its wallet ${row.wallet} does not map back to it`)
    }
  }
  return findings
}
