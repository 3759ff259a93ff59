// Every replica runs a reaper: it returns what expired leases hold. The script ends each attempt
// once, so several reapers at once are safe. Each pass stamps the replica as seen (src/market/replicas.ts).
import type { Logger } from 'pino'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { type Every, onTimer } from '../timing/every.ts'
import { stampReaperPass } from './replicas.ts'
import type { MarketSteps } from './steps.ts'

export function startReaper(
  store: Store,
  keys: Keyspace,
  steps: MarketSteps,
  intervalMs: number,
  logger: Logger,
  recordRetentionMs?: number,
  every: Every = onTimer,
): () => void {
  let running = false
  return every(intervalMs, async () => {
    if (running) return
    running = true
    try {
      // Drain in batches so one call never holds Redis for long.
      let reaped = await steps.reap(100, recordRetentionMs)
      let total = reaped
      while (reaped === 100) {
        reaped = await steps.reap(100, recordRetentionMs)
        total += reaped
      }
      if (total > 0) logger.warn({ reaped: total }, 'reaped expired leases')
      // The operator's health view: this replica is alive and its reaper ran.
      await stampReaperPass(store, keys, total)
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'reaper pass failed')
    } finally {
      running = false
    }
  })
}
