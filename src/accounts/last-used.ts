// `lastUsedAt` without a Redis write per request: a key is touched at most once a minute by this
// process, and not at all while the stored value (maybe written by another replica) is fresh.
// This holds key id -> time of our last write only; it never decides whether a key is valid.

export const TOUCH_INTERVAL_MS = 60_000
const PRUNE_AT = 10_000

export class LastUsedThrottle {
  private readonly touchedAt = new Map<string, number>()
  private pruneAt = PRUNE_AT

  constructor(private readonly now: () => number = Date.now) {}

  /** True when the caller should write `lastUsedAt` for this key now (and it is counted as done). */
  shouldTouch(keyId: string, storedLastUsedAt: number | null): boolean {
    const now = this.now()
    if (storedLastUsedAt !== null && now - storedLastUsedAt < TOUCH_INTERVAL_MS) return false
    const last = this.touchedAt.get(keyId)
    if (last !== undefined && now - last < TOUCH_INTERVAL_MS) return false
    if (this.touchedAt.size >= this.pruneAt) this.prune(now)
    this.touchedAt.set(keyId, now)
    return true
  }

  /** Counts a write made elsewhere for this key (admit's, by digest) as this process's own. */
  touched(keyId: string): void {
    if (this.touchedAt.size >= this.pruneAt) this.prune(this.now())
    this.touchedAt.set(keyId, this.now())
  }

  // Entries older than the interval decide nothing any more; drop them in one sweep, and sweep
  // again only once the map has doubled, so a busy replica does not sweep on every request.
  private prune(now: number): void {
    for (const [id, at] of this.touchedAt) if (now - at >= TOUCH_INTERVAL_MS) this.touchedAt.delete(id)
    this.pruneAt = Math.max(PRUNE_AT, this.touchedAt.size * 2)
  }
}
