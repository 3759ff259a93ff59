// Every replica runs a reaper: it returns what expired leases hold. One replica at a time reaps for
// all (it holds a claim in Redis, which lapses when it stops reaping), so adding replicas adds no
// reaping work; the scripts end each attempt once, so two reaping at once while the claim passes
// from one to another are still safe. Each pass stamps the replica as seen (src/market/replicas.ts).
import type { Logger } from 'pino'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { type Every, onTimer } from '../timing/every.ts'
import {
  earlierBuildSeen,
  forgetReplica,
  REPLICA_ID,
  stampReaperPass,
  tierlessBuildSeen,
} from './replicas.ts'
import type { MarketSteps } from './steps.ts'

/** Passes a claim outlives its holder's last: another replica takes over after that many silent ones. */
const CLAIM_PASSES = 3

/** Whether this replica reaps this pass: it holds the claim, or took it because none held it. */
export async function claimReaping(
  store: Store,
  keys: Keyspace,
  ttlMs: number,
  replica = REPLICA_ID,
): Promise<boolean> {
  const holder = await store.call('SET', keys.reaperClaim, replica, 'PX', ttlMs, 'NX', 'GET')
  if (holder === null) return true
  if (holder !== replica) return false
  // Still this replica's: held on for another ttl. Should it lapse in between and another replica
  // claim it, both reap this pass, which the scripts make safe, and the other skips the next.
  return (await store.call('SET', keys.reaperClaim, replica, 'PX', ttlMs, 'XX')) === 'OK'
}

export function startReaper(
  store: Store,
  keys: Keyspace,
  steps: MarketSteps,
  intervalMs: number,
  logger: Logger,
  recordRetentionMs?: number,
  every: Every = onTimer,
): () => Promise<void> {
  let running: Promise<void> | null = null
  const stop = every(intervalMs, () => {
    running ??= pass().finally(() => {
      running = null
    })
  })
  // Stopped: the pass under way finishes, and the replica is no longer seen (its last stamp gone).
  return async () => {
    stop()
    await running
    await forgetReplica(store, keys).catch(() => {})
  }

  async function pass() {
    let total = 0
    try {
      if (await claimReaping(store, keys, intervalMs * CLAIM_PASSES)) {
        // Read by the replica that reaps only: while a build keeping no capacity tiers is seen, the
        // tiers are not walked (tiers.ts); held apart there are none.
        const tierless = keys.layout === 'one-slot' && (await tierlessBuildSeen(store, keys))
        // Drain in batches so one call never holds Redis for long.
        let reaped = await steps.reap(100, recordRetentionMs, tierless)
        total = reaped
        while (reaped === 100) {
          reaped = await steps.reap(100, recordRetentionMs, tierless)
          total += reaped
        }
      }
      if (total > 0) logger.warn({ reaped: total }, 'reaped expired leases')
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'reaper pass failed')
    }
    // Whatever the reap did: the operator's health view (this replica is alive and its reaper
    // ran), and whether an earlier build runs, which fails closed (keys go by their digest) while
    // it cannot be told.
    try {
      await stampReaperPass(store, keys, total)
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'replica stamp failed')
    }
    steps.earlierBuildSeen(await earlierBuildSeen(store, keys))
  }
}
