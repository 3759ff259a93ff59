// The lease renewer and the reaper run by one driver instead of two timers: on a loaded machine a
// late renewal timer would let a punctual reaper take a lease the relay still holds, a race the
// machine's speed decides. Here every round renews first, then reaps, so a lease a stream holds is
// always fresh when a pass looks at it, and one left unrenewed still expires and is reaped.
import type { Every } from '../../src/timing/every.ts'

/** A driver for `config.market.every`: a round every `periodMs`, each job awaited in turn. */
export function lockstep(periodMs: number): { every: Every; stop(): void } {
  const jobs: (() => unknown)[] = []
  let running = false
  const timer = setInterval(async () => {
    if (running) return
    running = true
    try {
      // Newest first: a renewer starts with its first lease, after the reaper that started with the gateway.
      for (const job of jobs.toReversed()) await job()
    } finally {
      running = false
    }
  }, periodMs)
  timer.unref()
  return {
    every: (_periodMs, run) => {
      jobs.push(run)
      return () => {
        const at = jobs.indexOf(run)
        if (at >= 0) jobs.splice(at, 1)
      }
    },
    stop: () => clearInterval(timer),
  }
}
