// Where a new offer held apart lives. Its id names its hash tag, so the id picks its Cluster
// master: of a few random ids, the one whose master holds the fewest listed offers, so offers
// (and the reservations and posts their requests make) spread over the masters evenly instead of
// as the ids happen to hash. Off a Cluster, or on one slot, any random id.
import { randomUUID } from 'node:crypto'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { ownerKeyspaces } from './two-phase.ts'

/** Ids tried: with three masters the least loaded is missed with odds of (2/3)^64. */
const CANDIDATES = 64

export async function newOfferId(store: Store, keys: Keyspace): Promise<string> {
  const first = randomUUID()
  if (keys.layout !== 'apart') return first
  const owners = ownerKeyspaces(keys.prefix)
  const masterOf = (id: string) => store.masterOf(owners.offer(id).base)
  if (masterOf(first) === undefined) return first
  const offers = new Map<string, number>()
  for (const id of await store.smembers(keys.offers)) {
    const master = masterOf(id)
    if (master !== undefined) offers.set(master, (offers.get(master) ?? 0) + 1)
  }
  let best = first
  let fewest = offers.get(masterOf(first)!) ?? 0
  for (let i = 1; i < CANDIDATES && fewest > 0; i++) {
    const id = randomUUID()
    const held = offers.get(masterOf(id)!) ?? 0
    if (held < fewest) [best, fewest] = [id, held]
  }
  return best
}
