// Retrying an idempotent script while the store is away. Only for a call that is safe to repeat
// whether or not the lost try ran: a clear is (a second clear of the same attempt replays the
// first's result and changes nothing), an admit is not (its id would be refused as used).
import { isRedisUnavailable, isStoreClosed } from './connection.ts'

/**
 * Tries `call`, and again after each wait while it fails for want of Redis; other errors at once,
 * and this one too once `stopped` says so (a process shutting down does not wait the store out) or
 * the store is closed (a stop closes it under a Redis that never answers: the waits a call still
 * has would outlast the stop, and what it keeps on failing, a delivered clear, be lost).
 */
export async function whileStoreAway<T>(
  call: () => Promise<T>,
  waitsMs: readonly number[],
  stopped: () => boolean = () => false,
): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await call()
    } catch (error) {
      if (i >= waitsMs.length || !isRedisUnavailable(error) || isStoreClosed(error) || stopped()) throw error
      await Bun.sleep(waitsMs[i]!)
    }
  }
}

/**
 * Waits adding up to at least `totalMs`: short ones first (a dropped connection comes back within
 * a few hundred milliseconds), then one a second (a restart, a data set loading).
 */
export function waitsFor(totalMs: number): number[] {
  const waits: number[] = []
  let sum = 0
  for (let wait = 50; sum < totalMs; wait = Math.min(wait * 2, 1_000)) {
    waits.push(wait)
    sum += wait
  }
  return waits
}
