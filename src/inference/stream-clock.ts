// One timer per process wakes every open stream to check its silence (keep-alive due, supplier
// stalled), instead of a timer, a promise and a race per supplier read: per open stream, that is
// memory held for nothing while the stream waits. A stream is late by at most one period.
import { TickingSet } from '../timing/ticking-set.ts'
import type { StreamTiming } from './relay-stream.ts'

export interface Ticking {
  tick(now: number): void
}

/** Ticks every open stream of one timing. */
export type StreamClock = TickingSet<Ticking>

const clocks = new WeakMap<StreamTiming, StreamClock>()

/** The clock of one stream timing: a tenth of its shortest wait, from 10 ms to 250 ms. */
export function clockFor(timing: StreamTiming): StreamClock {
  let clock = clocks.get(timing)
  if (!clock) {
    const period = Math.floor(Math.min(timing.keepAliveMs, timing.idleMs) / 10)
    clock = new TickingSet<Ticking>(Math.min(250, Math.max(10, period)), (stream, now) => stream.tick(now))
    clocks.set(timing, clock)
  }
  return clock
}
