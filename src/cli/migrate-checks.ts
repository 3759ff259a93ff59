// What keeps a market from being migrated now: a replica seen lately (a gateway may be running), or
// money or capacity held for a request in flight, which would be ended on one side of the move and
// sought on the other. Read only: a refused migration changes nothing.
import { marketGlob, scanHashes } from '../market/audit.ts'
import { replicasSeen } from '../market/replicas.ts'
import { attemptFields } from '../records/attempt-fields.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

/** At most this many owners are named in a refusal; the rest are counted. */
const NAMED = 5

export async function seenReplicas(store: Store, keys: Keyspace, withinMs: number): Promise<string[]> {
  const seen = await replicasSeen(store, keys, withinMs)
  return seen.map(
    (replica) =>
      `replica ${replica} reaped within the last ${withinMs / 1000} s: stop every gateway (a replica killed ` +
      'without a drain is no longer seen once that time has passed)',
  )
}

export async function openWork(store: Store, keys: Keyspace): Promise<string[]> {
  const open: string[] = []
  const leases = (await store.zcard(keys.leases)) + (await store.zcard(keys.earlierLeases))
  if (leases > 0) open.push(`${leases} lease(s) open: requests in flight`)
  const listing = await store.zcard(keys.offersListing)
  if (listing > 0) open.push(`${listing} offer change(s) part-way`)
  const attempts = await scanHashes(store, marketGlob(keys.prefix, 'attempt:*'))
  const admitted = attempts.filter((a) => attemptFields(a).state === 'admitted').length
  if (admitted > 0) open.push(`${admitted} attempt(s) admitted and not ended`)
  const holding = async (ids: string[], hash: (id: string) => string, what: string) => {
    const rows = await Promise.all(ids.map((id) => store.hmget(hash(id), 'held', 'inflight')))
    const named = ids.filter((_, i) => Number(rows[i]![0] ?? 0) > 0 || Number(rows[i]![1] ?? 0) > 0)
    if (named.length === 0) return
    const more = named.length > NAMED ? ` and ${named.length - NAMED} more` : ''
    open.push(`${what} ${named.slice(0, NAMED).join(', ')}${more} hold(s) for requests in flight`)
  }
  await holding(await store.smembers(keys.accounts), keys.account, 'account(s)')
  await holding(await store.smembers(keys.offers), keys.offer, 'offer(s)')
  return open
}
