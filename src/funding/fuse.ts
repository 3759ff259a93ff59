// The signup's global fuse: signup cannot attribute callers (no key yet), so settlement calls are
// capped per minute across every replica, counted in Redis. Past the cap: 429 with Retry-After.
import type Redis from 'ioredis'
import { ApiError } from '../errors.ts'
import type { Keyspace } from '../redis/keys.ts'

export class SignupFuse {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keyspace,
    private readonly perMinute: number,
  ) {}

  /** Takes one settlement slot of this minute, or throws the 429. */
  async take(now = Date.now()): Promise<void> {
    const minute = Math.floor(now / 60_000)
    const key = this.keys.signupFuse(minute)
    const [[, count]] = (await this.redis.multi().incr(key).pexpire(key, 120_000).exec()) as [[null, number]]
    if (count > this.perMinute) {
      const retryAfter = Math.max(1, Math.ceil(((minute + 1) * 60_000 - now) / 1000))
      throw new ApiError(
        429,
        'signup_fuse',
        'too many signups are settling right now; retry after Retry-After',
        {
          headers: { 'retry-after': String(retryAfter) },
        },
      )
    }
  }
}
