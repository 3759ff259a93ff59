// A fuse across every replica: at most `perMinute` takes per wall-clock minute, counted in Redis
// under a key per minute (kept two minutes), one count per scope when the key names one (a
// client's address). Past it, the caller's 429 with Retry-After to the next minute. For what no
// key can be charged for (a signup, a sign-in nonce).
import type { ApiError } from '../errors.ts'
import type { Store } from './store.ts'

export class MinuteFuse {
  constructor(
    private readonly store: Store,
    private readonly keyOf: (minute: number, scope: string) => string,
    private readonly perMinute: number,
    private readonly refusal: (retryAfterSeconds: number) => ApiError,
    /** The wall clock, in ms: a test sets one to stay inside a minute instead of waiting for the next. */
    private readonly clock: () => number = Date.now,
  ) {}

  /** Takes one slot of this minute (of this scope's count), or throws the refusal. */
  async take(scope = '', now = this.clock()): Promise<void> {
    const minute = Math.floor(now / 60_000)
    const key = this.keyOf(minute, scope)
    const [[, count]] = (await this.store.multi().incr(key).pexpire(key, 120_000).exec()) as [[null, number]]
    if (count > this.perMinute) {
      throw this.refusal(Math.max(1, Math.ceil(((minute + 1) * 60_000 - now) / 1000)))
    }
  }
}
