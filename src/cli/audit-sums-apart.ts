// The live audit's check of the market's spend held apart (audit-sums.ts's, across slots): what
// buyers were charged is what offers were posted (earnings and fees, less what the market covered)
// plus what is in transit, charged on an account and not yet posted on its offer. Each side only
// grows; a pair's charge counts on the accounts' side first, on the offers' once posted, and
// while in transit its reservation is pending (leased). So, each offer read at one instant with
// its pending reservations (market/audit-offers-at.ts) and their attempts read after: the offers
// and their charged pending pairs read before the accounts' spent are at most it, those read after
// at least it. At rest the two readings are equal and the check is audit-apart.ts's, exact.
import type { AuditFinding } from '../market/audit.ts'
import { type OfferAt, readOffersAt } from '../market/audit-offers-at.ts'
import { attemptFields } from '../records/attempt-fields.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

/** What offers were posted: their earnings and fees less what the market covered. */
function posted(offers: OfferAt[]): number {
  const num = (row: Record<string, string>, field: string) => Number(row[field] ?? 0)
  return offers.reduce(
    (sum, { row }) => sum + num(row, 'earned') + num(row, 'fees') - num(row, 'uncovered'),
    0,
  )
}

/** What the offers' pending reservations' attempts were charged on their accounts, read now. */
async function inTransit(store: Store, keys: Keyspace, offers: OfferAt[]): Promise<number> {
  const pending = offers.flatMap((at) =>
    [...at.reservations]
      .filter(([, r]) => r.state === 'reserved' && r.offerId === at.offerId)
      .map(([id, r]) => ({ id, accountId: r.accountId!, offerId: at.offerId })),
  )
  const rows = await Promise.all(pending.map((p) => store.hgetall(keys.accountAttempt(p.accountId, p.id))))
  return rows.reduce((sum, row, i) => {
    if (Object.keys(row).length === 0) return sum
    const a = attemptFields(row)
    const charged = a.state === 'cleared' && a.offerId === pending[i]!.offerId
    return charged ? sum + Number(a.costUsdc ?? 0) : sum
  }, 0)
}

export async function readSpendAgainApart(store: Store, keys: Keyspace): Promise<AuditFinding[]> {
  const offerIds = await store.smembers(keys.offers)
  const before = await readOffersAt(store, keys, offerIds)
  const low = posted(before) + (await inTransit(store, keys, before))
  const accountIds = await store.smembers(keys.accounts)
  const spents = await Promise.all(accountIds.map((id) => store.hget(keys.account(id), 'spent')))
  const spent = spents.reduce((sum, value) => sum + Number(value ?? 0), 0)
  const after = await readOffersAt(store, keys, offerIds)
  const transit = await inTransit(store, keys, after)
  if (low <= spent && spent <= posted(after) + transit) return []
  return [
    {
      subject: 'market',
      problem: `buyer spend ${spent} != supplier earnings and fees less uncovered ${posted(after)} + in transit ${transit}`,
    },
  ]
}
