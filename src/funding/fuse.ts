// The signup's global fuse: signup cannot attribute callers (no key yet), so settlement calls are
// capped per minute across every replica, counted in Redis. Past the cap: 429 with Retry-After.
import { ApiError } from '../errors.ts'
import type { Keyspace } from '../redis/keys.ts'
import { MinuteFuse } from '../redis/minute-fuse.ts'
import type { Store } from '../redis/store.ts'

export class SignupFuse extends MinuteFuse {
  constructor(store: Store, keys: Keyspace, perMinute: number, clock?: () => number) {
    super(
      store,
      keys.signupFuse,
      perMinute,
      (retryAfter) =>
        new ApiError(429, 'signup_fuse', 'too many signups are settling right now; retry after Retry-After', {
          headers: { 'retry-after': String(retryAfter) },
        }),
      clock,
    )
  }
}
