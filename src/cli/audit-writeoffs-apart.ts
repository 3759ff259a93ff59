// The live audit's check of the write-offs held apart (audit-sums.ts's, across slots): what the
// accounts wrote off is what the write-off lists hold. A late clear adds its write-off to its
// account and lists it on its account's shard in one script, and neither side ever shrinks: so
// every shard's list read before the accounts is at most what they hold, and read after at least.
// The lists read on every shard, then the accounts, then the lists again: a write-off landing
// between the reads falls inside the bracket, and a side outside it is a fault. At rest the three
// readings are equal and the check is the whole audit's (market/audit.ts), exact.
import { type AuditFinding, writeOffsListed } from '../market/audit.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

/** What the listed accounts wrote off, each read on its own slot; an account listed without a hash adds nothing. */
async function accountsWrittenOff(store: Store, keys: Keyspace): Promise<number> {
  const ids = await store.smembers(keys.accounts)
  const rows = await Promise.all(ids.map((id) => store.hmget(keys.account(id), 'id', 'writtenOff')))
  return rows.reduce((sum, [id, value]) => (id === null ? sum : sum + Number(value ?? 0)), 0)
}

export async function readWriteOffsAgainApart(store: Store, keys: Keyspace): Promise<AuditFinding[]> {
  const before = await writeOffsListed(store, keys)
  // The accounts listed after the first reading: one listed later wrote off nothing before it.
  const writtenOff = await accountsWrittenOff(store, keys)
  const after = await writeOffsListed(store, keys)
  if (before <= writtenOff && writtenOff <= after) return []
  return [
    { subject: 'market', problem: `accounts' written off ${writtenOff} != the write-off list's ${after}` },
  ]
}
