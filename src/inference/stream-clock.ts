// One timer per process wakes every open stream to check its silence (keep-alive due, supplier
// stalled), instead of a timer, a promise and a race per supplier read: per open stream, that is
// memory held for nothing while the stream waits. A stream is late by at most one period.
import type { StreamTiming } from './relay-stream.ts'

export interface Ticking {
  tick(now: number): void
}

export class StreamClock {
  private readonly open = new Set<Ticking>()
  private timer: Timer | null = null

  constructor(readonly periodMs: number) {}

  add(stream: Ticking): void {
    this.open.add(stream)
    if (this.timer) return
    this.timer = setInterval(() => this.tickAll(), this.periodMs)
    this.timer.unref()
  }

  remove(stream: Ticking): void {
    this.open.delete(stream)
    if (this.open.size === 0 && this.timer) {
      clearInterval(this.timer)
      this.timer = null
    }
  }

  private tickAll(): void {
    const now = Date.now()
    for (const stream of this.open) stream.tick(now)
  }
}

const clocks = new WeakMap<StreamTiming, StreamClock>()

/** The clock of one stream timing: a tenth of its shortest wait, from 10 ms to 250 ms. */
export function clockFor(timing: StreamTiming): StreamClock {
  let clock = clocks.get(timing)
  if (!clock) {
    const period = Math.floor(Math.min(timing.keepAliveMs, timing.idleMs) / 10)
    clock = new StreamClock(Math.min(250, Math.max(10, period)))
    clocks.set(timing, clock)
  }
  return clock
}
