// The live audit's checks of sums over many owners (cli/audit-live.ts), which no read of one slot
// takes at one instant. Each side of them only grows, and the script that adds to one side adds
// the same to the other: a clear adds its charge to its buyer's spent and to its offer's earned and
// fees, a late clear its write-off to its account's and to the list, a credit to funded and to its
// payment's record or the audit Stream. So the side read first and read again last brackets the
// other, read between: at rest the three are equal and the check is the whole audit's, exact; a
// side outside its bracket is a fault, whatever moved meanwhile. On one slot (held apart, what is
// in transit between the sides is audit-apart.ts's).
import { fundedProblem, type Given, givenToAccounts } from '../funding/audit.ts'
import type { AuditFinding } from '../market/audit.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

/** The sums to read again: the market's spend, its write-offs, and the funded of these accounts. */
export interface Sums {
  market: boolean
  writeOffs: boolean
  funded: Set<string>
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

export async function recheckSums(store: Store, keys: Keyspace, which: Sums): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  const off = (subject: string, problem: string) => findings.push({ subject, problem })
  const offers = async () => summed(store, await store.smembers(keys.offers), keys.offer, ['earned', 'fees'])
  const listed = async () =>
    (await store.hvals(keys.writeoffs)).reduce((sum, amount) => sum + Number(amount), 0)
  const given = async (): Promise<Given | undefined> =>
    which.funded.size > 0 ? givenToAccounts(store, keys) : undefined

  const [offersBefore, listedBefore, givenBefore] = [await offers(), await listed(), await given()]
  const accounts = await summed(store, await store.smembers(keys.accounts), keys.account, [
    'spent',
    'writtenOff',
  ])
  const funded = new Map<string, string | null>()
  for (const id of which.funded) funded.set(id, await store.hget(keys.account(id), 'funded'))
  const [offersAfter, listedAfter, givenAfter] = [await offers(), await listed(), await given()]

  const within = (low: number, value: number, high: number) => low <= value && value <= high
  const spent = accounts.get('spent')!
  const paid = (sums: Map<string, number>) => sums.get('earned')! + sums.get('fees')!
  if (which.market && !within(paid(offersBefore), spent, paid(offersAfter)))
    off(
      'market',
      `buyer spend ${spent} != supplier earnings ${offersAfter.get('earned')} + fees ${offersAfter.get('fees')}`,
    )
  const writtenOff = accounts.get('writtenOff')!
  if (which.writeOffs && !within(listedBefore, writtenOff, listedAfter))
    off('market', `accounts' written off ${writtenOff} != the write-off list's ${listedAfter}`)
  if (givenBefore && givenAfter)
    for (const [id, value] of funded) {
      const total = (g: Given) => (g.paid.get(id) ?? 0) + (g.byHand.get(id) ?? 0)
      if (value !== null && !within(total(givenBefore), Number(value), total(givenAfter)))
        off(`account ${id}`, fundedProblem(value, givenAfter, id))
    }
  return findings
}
