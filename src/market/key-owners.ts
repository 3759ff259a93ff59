// Whose an API key is, by its digest, as this replica last learned it from Redis: a key is resolved
// by its digest once, and its later requests name its account and key ids, which spares each
// admission a read of the key's record. Only ever a guess of who, never of whether: a revoked key is
// marked on its account (lua/revoke-key.lua), which every admission reads, so it is refused at once.
// An entry is kept for a minute at most. A build from before the mark revokes a key without it: while
// a replica of such a build is seen (src/market/replicas.ts), nothing is kept and every admission
// looks the key up by its digest, as that build's own do.

/** A key's owner as its record names it. */
export interface KeyOwner {
  accountId: string
  apiKeyId: string
}

export const KEY_OWNER_TTL_MS = 60_000
// Enough for every key a replica serves in a minute; past it, all are forgotten at once (each is
// looked up again on its next request) rather than tracking which is oldest.
const MAX_KEY_OWNERS = 10_000

export class KeyOwners {
  private readonly owners = new Map<string, { owner: KeyOwner; until: number }>()
  private keeping = true

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Whether owners are kept: not while a replica of an earlier build is seen, whose revoke leaves no
   * mark. Stopping forgets every owner kept, so none learned before outlives it.
   */
  keep(keeping: boolean): void {
    if (!keeping) this.owners.clear()
    this.keeping = keeping
  }

  /** False while owners are not kept: a key named by ids alone is then not enough (ApartSteps). */
  get kept(): boolean {
    return this.keeping
  }

  /** The owner learned for this digest within the last minute, or undefined. */
  get(digest: string): KeyOwner | undefined {
    const entry = this.owners.get(digest)
    if (!entry) return undefined
    if (this.now() < entry.until) return entry.owner
    this.owners.delete(digest)
    return undefined
  }

  set(digest: string, owner: KeyOwner): void {
    if (!this.keeping) return
    if (this.owners.size >= MAX_KEY_OWNERS) this.owners.clear()
    this.owners.set(digest, { owner, until: this.now() + KEY_OWNER_TTL_MS })
  }

  /** Forgets a digest: its key was refused as unknown or revoked. */
  drop(digest: string): void {
    this.owners.delete(digest)
  }
}
