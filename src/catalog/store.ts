// The catalog in Redis: replaced whole by the sync (one Lua script), read by every replica. Reads
// go through a short in-process cache because every inference request needs its model's prices.
// An expired cache is still served while one read of Redis refreshes it in the background: no
// request waits on that read, and a burst of requests at expiry makes one read, not one each.
import type { Keyspace } from '../redis/keys.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { bareModelId, type CatalogEntry } from './entry.ts'

const CACHE_MS = 1_000
// An empty catalog in Redis (a fresh or wiped store) is refilled at once, at most this often.
const REFILL_EVERY_MS = 5_000

export class CatalogStore {
  private cache: { at: number; entries: Map<string, CatalogEntry> } | null = null
  /** The read of Redis under way, shared by every caller that needs it. */
  private loading: Promise<Map<string, CatalogEntry>> | null = null
  /** Bumped by replace: a read begun before it must not install what it read. */
  private generation = 0
  private refilling: Promise<unknown> | null = null
  private lastRefill = 0

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    /** Syncs from the upstream; called when Redis holds no catalog at all. */
    private readonly refill?: () => Promise<unknown>,
    /** The clock the cache ages by (a test moves it instead of waiting). */
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * A sync's ticket, taken before it asks the upstream: replace writes a ticketed list only when
   * no list asked for later (a higher ticket, any replica's) has been written already.
   */
  async ticket(): Promise<number> {
    return Number(await this.store.hincrby(this.keys.catalogMeta, 'ticket', 1))
  }

  /** Writes the whole catalog; -1 when `ticket` is older than the list already written. */
  async replace(entries: CatalogEntry[], source: string, ticket?: number): Promise<number> {
    const rows: string[] = []
    for (const entry of entries) rows.push(entry.row.id, JSON.stringify(entry))
    const count = Number(
      await runScript(
        this.store,
        'catalogReplace',
        [this.keys.catalog, this.keys.catalogMeta],
        { syncedAt: Date.now(), sourceUrl: source, ticket: ticket ?? '' },
        rows,
      ),
    )
    this.generation += 1
    this.cache = null
    this.loading = null
    return count
  }

  async all(): Promise<Map<string, CatalogEntry>> {
    const cached = this.cache
    if (!cached) return this.reload()
    // Expired: refreshed in the background; a failed read is tried again by the next caller.
    if (this.now() - cached.at >= CACHE_MS) this.reload().catch(() => {})
    return cached.entries
  }

  private reload(): Promise<Map<string, CatalogEntry>> {
    if (!this.loading) {
      const loading = this.load().finally(() => {
        if (this.loading === loading) this.loading = null
      })
      this.loading = loading
    }
    return this.loading
  }

  private async load(): Promise<Map<string, CatalogEntry>> {
    const generation = this.generation
    const now = this.now()
    let raw = await this.store.hgetall(this.keys.catalog)
    if (Object.keys(raw).length === 0 && this.refill && now - this.lastRefill > REFILL_EVERY_MS) {
      this.lastRefill = now
      this.refilling ??= this.refill()
        .catch(() => {})
        .finally(() => {
          this.refilling = null
        })
      await this.refilling
      raw = await this.store.hgetall(this.keys.catalog)
    }
    const entries = parsed(raw)
    if (generation === this.generation) this.cache = { at: now, entries }
    return entries
  }

  /** What Redis holds now, read once: no cache, and an empty catalog is not refilled (a sync reads it). */
  async stored(): Promise<Map<string, CatalogEntry>> {
    return parsed(await this.store.hgetall(this.keys.catalog))
  }

  /** One entry by bare slug or `svc/` id; undefined when it is not on the list. */
  async get(id: string): Promise<CatalogEntry | undefined> {
    return (await this.all()).get(bareModelId(id))
  }
}

function parsed(raw: Record<string, string>): Map<string, CatalogEntry> {
  const entries = new Map<string, CatalogEntry>()
  for (const id of Object.keys(raw).sort()) entries.set(id, JSON.parse(raw[id]!) as CatalogEntry)
  return entries
}
