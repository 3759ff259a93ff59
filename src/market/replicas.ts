// Which replicas are alive, as the operator sees it: each one's reaper pass stamps the replica's
// id in a sorted set, so the replicas seen are those that reaped lately, and the last pass of any
// replica is kept beside them. Their number sets how often each replica's view reads the ladder.
import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

/** This process's name among the replicas: host, pid and a random part (pids repeat across hosts). */
export const REPLICA_ID = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`

/** A replica silent this long is taken off the set at the next stamp. */
const FORGET_MS = 3_600_000

export async function stampReaperPass(store: Store, keys: Keyspace, reaped: number): Promise<void> {
  const now = Date.now()
  await store
    .pipeline()
    .zadd(keys.replicas, now, REPLICA_ID)
    .zadd(keys.replicasMarking, now, REPLICA_ID)
    .zadd(keys.replicasTiering, now, REPLICA_ID)
    .zremrangebyscore(keys.replicas, '-inf', now - FORGET_MS)
    .zremrangebyscore(keys.replicasMarking, '-inf', now - FORGET_MS)
    .zremrangebyscore(keys.replicasTiering, '-inf', now - FORGET_MS)
    .hset(keys.reaperLastRun, 'at', now, 'replica', REPLICA_ID, 'reaped', reaped)
    .exec()
}

/** A replica starting is seen at once, before its first reaper pass: a migration refuses to begin. */
export async function stampReplica(store: Store, keys: Keyspace): Promise<void> {
  const now = Date.now()
  await store
    .pipeline()
    .zadd(keys.replicas, now, REPLICA_ID)
    .zadd(keys.replicasMarking, now, REPLICA_ID)
    .zadd(keys.replicasTiering, now, REPLICA_ID)
    .exec()
}

/** A replica stopping is no longer seen: what `svc-gateway layout migrate` waits for. */
export async function forgetReplica(store: Store, keys: Keyspace): Promise<void> {
  await store
    .pipeline()
    .zrem(keys.replicas, REPLICA_ID)
    .zrem(keys.replicasMarking, REPLICA_ID)
    .zrem(keys.replicasTiering, REPLICA_ID)
    .exec()
}

/**
 * How far back a replica of an earlier build counts as running: longer than its stamps' interval,
 * whatever it was started with, and than the clocks of a deployment differ by. One that stopped
 * without saying so keeps keys named by their digest this long; one that stops cleanly leaves at once.
 */
export const EARLIER_BUILD_WITHIN_MS = 300_000

/**
 * Whether a replica of an earlier build was seen within `withinMs`: one whose revoke of a key
 * leaves no mark on its account, so a key must not be named by ids this replica learned before
 * (src/market/key-owners.ts) while it may still revoke one. True as well when Redis cannot say:
 * the check fails closed.
 */
export async function earlierBuildSeen(
  store: Store,
  keys: Keyspace,
  withinMs = EARLIER_BUILD_WITHIN_MS,
): Promise<boolean> {
  return unstampedSeen(store, keys, keys.replicasMarking, withinMs)
}

/**
 * Whether a replica of a build that keeps no capacity tiers (lua/lib/ladder.lua) was seen within
 * `withinMs`: its ladder writes leave them behind, so they are not walked (src/market/tiers.ts).
 * True as well when Redis cannot say.
 */
export async function tierlessBuildSeen(
  store: Store,
  keys: Keyspace,
  withinMs = EARLIER_BUILD_WITHIN_MS,
): Promise<boolean> {
  return unstampedSeen(store, keys, keys.replicasTiering, withinMs)
}

/** Whether a replica seen within `withinMs` is missing from `stamps`, a zset its build does not write. */
async function unstampedSeen(store: Store, keys: Keyspace, stamps: string, withinMs: number) {
  const since = Date.now() - withinMs
  try {
    const [seen, stamped] = await Promise.all([
      store.zrangebyscore(keys.replicas, since, '+inf'),
      store.zrangebyscore(stamps, '-inf', '+inf'),
    ])
    const have = new Set(stamped)
    return seen.some((id) => !have.has(id))
  } catch {
    return true
  }
}

/** The replicas whose reaper ran within `withinMs`: alive, as far as the market can tell. */
export async function replicasSeen(store: Store, keys: Keyspace, withinMs: number): Promise<string[]> {
  return store.zrangebyscore(keys.replicas, Date.now() - withinMs, '+inf')
}

/** How long a replica stays seen after its last reaper pass, for a reap interval. */
export const seenWithinMs = (reapIntervalMs: number) => Math.max(10_000, reapIntervalMs * 5)

/** Each live replica's share of the market's full reads of the ladder: together about one a second. */
export const FULL_READ_EACH_MS = 1_000
/** The longest a replica's view goes without a full read, however many replicas there are. */
export const FULL_READ_MAX_MS = 30_000

/**
 * How long a replica's view of the ladder goes between full reads while the ladder's version stays
 * (ladder-view.ts), for the replicas seen: the more there are, the less often each reads.
 */
export const fullReadPeriodMs = (replicas: number) =>
  Math.min(FULL_READ_MAX_MS, Math.max(1, replicas) * FULL_READ_EACH_MS)

export async function replicaHealth(store: Store, keys: Keyspace, withinMs: number) {
  const now = Date.now()
  const [seen, marking, last] = await Promise.all([
    store.zrangebyscore(keys.replicas, now - withinMs, '+inf', 'WITHSCORES'),
    store.zrangebyscore(keys.replicasMarking, '-inf', '+inf'),
    store.hgetall(keys.reaperLastRun),
  ])
  const marks = new Set(marking)
  // An earlier build's replica keeps every other replica naming keys by their digest: the
  // operator sees which one to stop.
  const replicas: { id: string; lastSeenAt: string; earlierBuild: boolean }[] = []
  for (let i = 0; i < seen.length; i += 2) {
    const id = seen[i]!
    replicas.push({
      id,
      lastSeenAt: new Date(Number(seen[i + 1])).toISOString(),
      earlierBuild: !marks.has(id),
    })
  }
  return {
    replicas,
    reaper: last.at
      ? {
          lastRunAt: new Date(Number(last.at)).toISOString(),
          replica: last.replica ?? '',
          reaped: Number(last.reaped ?? 0),
        }
      : null,
  }
}
