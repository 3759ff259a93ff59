// The deadline of one supplier call.

/** What a deadline fails when it passes: the opening connection, then the exchange. */
export interface DeadlineTarget {
  timedOut(error: Error): void
}

/**
 * A call's deadline: one timer from the request's start, taken by the connection while it opens
 * and then by the exchange, instead of an AbortController and a composite signal per call, which
 * showed in the gateway's CPU profile (see BENCHMARKS.md, "Supplier calls on our own HTTP client").
 */
export class Deadline {
  private timer: Timer | null
  private target: DeadlineTarget | null = null
  private readonly at: number

  constructor(
    ms: number,
    /** Over at the first body bytes of a 2xx answer (a stream), not only at the answer's end. */
    readonly untilBody: boolean,
  ) {
    this.at = performance.now() + ms
    // The deadline itself as the timer's argument: no closure per call.
    this.timer = setTimeout(expire, ms, this)
  }

  aim(target: DeadlineTarget): void {
    this.target = target
  }

  expire(): void {
    this.timer = null
    const target = this.target
    this.target = null
    target?.timedOut(new DOMException('the supplier did not answer in time', 'TimeoutError'))
  }

  /** Over: the timer is cleared, nothing is failed any more. */
  end(): void {
    this.target = null
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
  }

  /** The same deadline for a second try (a stale idle connection); false once it has passed. */
  restart(): boolean {
    this.end()
    const left = this.at - performance.now()
    if (left <= 0) return false
    this.timer = setTimeout(expire, left, this)
    return true
  }
}

function expire(deadline: Deadline): void {
  deadline.expire()
}
