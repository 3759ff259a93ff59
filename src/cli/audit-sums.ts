// The live audit's checks of sums over many owners (cli/audit-live.ts), which no read of one slot
// takes at one instant. Each side of them only grows, and the script that adds to one side adds
// the same to the other: a clear adds its charge to its buyer's spent and to its offer's earned and
// fees, a late clear its write-off to its account's and to the list, a credit to funded and to its
// payment's record or the audit Stream. So the side read first and read again last brackets the
// other, read between: at rest the three are equal and the check is the whole audit's, exact; a
// side outside its bracket is a fault, whatever moved meanwhile. Held apart, the market's spend,
// with what is in transit between its sides, is audit-sums-apart.ts's; the write-offs, listed on
// every shard, audit-writeoffs-apart.ts's.
import { fundedProblem, type Given, givenToAccounts } from '../funding/audit.ts'
import type { AuditFinding } from '../market/audit.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { sumOfField } from '../redis/streams.ts'
import { fillStreams } from '../suppliers/fills.ts'
import { readSpendAgainApart } from './audit-sums-apart.ts'
import { readWriteOffsAgainApart } from './audit-writeoffs-apart.ts'

/**
 * The sums to read again: the market's spend, its write-offs, the funded of these accounts, and the
 * fills of these suppliers.
 */
export interface Sums {
  market: boolean
  writeOffs: boolean
  funded: Set<string>
  suppliers: Set<string>
}

/** Each field summed over the hashes of a set's members (one pipeline: they share the slot). */
async function summed(store: Store, ids: string[], key: (id: string) => string, fields: string[]) {
  const sums = new Map(fields.map((f) => [f, 0]))
  if (ids.length === 0) return sums
  const pipeline = store.pipeline()
  for (const id of ids) pipeline.hmget(key(id), 'id', ...fields)
  for (const [, row] of (await pipeline.exec()) ?? []) {
    const [id, ...values] = row as (string | null)[]
    if (id === null) continue
    for (const [i, f] of fields.entries()) sums.set(f, sums.get(f)! + Number(values[i] ?? 0))
  }
  return sums
}

export async function readSumsAgain(store: Store, keys: Keyspace, which: Sums): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  const off = (subject: string, problem: string) => findings.push({ subject, problem })
  const offers = async () => summed(store, await store.smembers(keys.offers), keys.offer, ['earned', 'fees'])
  const listed = async () =>
    (await store.hvals(keys.writeoffs)).reduce((sum, amount) => sum + Number(amount), 0)
  const given = async (): Promise<Given | undefined> =>
    which.funded.size > 0 ? givenToAccounts(store, keys) : undefined

  // Held apart, the spend and the write-offs are summed across slots; the rest is on one.
  const apart = keys.layout === 'apart'
  if (apart && which.market) findings.push(...(await readSpendAgainApart(store, keys)))
  if (apart && which.writeOffs) findings.push(...(await readWriteOffsAgainApart(store, keys)))
  const market = !apart && (which.market || which.writeOffs)
  const none = new Map<string, number>()
  const [offersBefore, listedBefore] = market ? [await offers(), await listed()] : [none, 0]
  const givenBefore = await given()
  const accounts = market
    ? await summed(store, await store.smembers(keys.accounts), keys.account, ['spent', 'writtenOff'])
    : none
  const funded = new Map<string, string | null>()
  for (const id of which.funded) funded.set(id, await store.hget(keys.account(id), 'funded'))
  const [offersAfter, listedAfter] = market ? [await offers(), await listed()] : [none, 0]
  const givenAfter = await given()

  const within = (low: number, value: number, high: number) => low <= value && value <= high
  const spent = accounts.get('spent')!
  const paid = (sums: Map<string, number>) => sums.get('earned')! + sums.get('fees')!
  if (market && which.market && !within(paid(offersBefore), spent, paid(offersAfter)))
    off(
      'market',
      `buyer spend ${spent} != supplier earnings ${offersAfter.get('earned')} + fees ${offersAfter.get('fees')}`,
    )
  const writtenOff = accounts.get('writtenOff')!
  if (market && which.writeOffs && !within(listedBefore, writtenOff, listedAfter))
    off('market', `accounts' written off ${writtenOff} != the write-off list's ${listedAfter}`)
  if (givenBefore && givenAfter)
    for (const [id, value] of funded) {
      const total = (g: Given) => (g.paid.get(id) ?? 0) + (g.byHand.get(id) ?? 0)
      if (value !== null && !within(total(givenBefore), Number(value), total(givenAfter)))
        off(`account ${id}`, fundedProblem(value, givenAfter, id))
    }
  findings.push(...(await readFillsAgain(store, keys, which.suppliers)))
  return findings
}

/**
 * A supplier's fills against its offers' earned: a clear (a post, held apart) adds to an offer's
 * earned and appends its fill in one script, so the offers' earned read before and after the
 * fills bracket them.
 */
async function readFillsAgain(store: Store, keys: Keyspace, suppliers: Set<string>): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  for (const id of suppliers) {
    const offerIds = await store.smembers(keys.supplierOffers(id))
    const earned = async () =>
      (await Promise.all(offerIds.map((offerId) => store.hget(keys.offer(offerId), 'earned')))).reduce(
        (sum, value) => sum + Number(value ?? 0),
        0,
      )
    const before = await earned()
    const fills = { sum: 0, complete: true }
    for (const stream of await fillStreams(store, keys, id)) {
      const one = await sumOfField(store, stream, 'earnedUsdc')
      fills.sum += one.sum
      fills.complete &&= one.complete
    }
    const after = await earned()
    if (fills.complete && !(before <= fills.sum && fills.sum <= after))
      findings.push({
        subject: `supplier ${id}`,
        problem: `fills earned ${fills.sum} != its offers' earned ${after}`,
      })
  }
  return findings
}
