// The catalog in Redis: replaced whole by the sync (one Lua script), read by every replica. Reads
// go through a short in-process cache because every inference request needs its model's prices.
import type Redis from 'ioredis'
import type { Keyspace } from '../redis/keys.ts'
import { runScript } from '../redis/scripts.ts'
import { bareModelId, type CatalogEntry } from './entry.ts'

const CACHE_MS = 1_000
// An empty catalog in Redis (a fresh or wiped store) is refilled at once, at most this often.
const REFILL_EVERY_MS = 5_000

export class CatalogStore {
  private cache: { at: number; entries: Map<string, CatalogEntry> } | null = null
  private refilling: Promise<unknown> | null = null
  private lastRefill = 0

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keyspace,
    /** Syncs from the upstream; called when Redis holds no catalog at all. */
    private readonly refill?: () => Promise<unknown>,
  ) {}

  async replace(entries: CatalogEntry[], source: string): Promise<number> {
    const args: string[] = [String(Date.now()), source]
    for (const entry of entries) args.push(entry.row.id, JSON.stringify(entry))
    const count = Number(
      await runScript(this.redis, 'catalogReplace', [this.keys.catalog, this.keys.catalogMeta], args),
    )
    this.cache = null
    return count
  }

  async all(): Promise<Map<string, CatalogEntry>> {
    const now = Date.now()
    if (this.cache && now - this.cache.at < CACHE_MS) return this.cache.entries
    let raw = await this.redis.hgetall(this.keys.catalog)
    if (Object.keys(raw).length === 0 && this.refill && now - this.lastRefill > REFILL_EVERY_MS) {
      this.lastRefill = now
      this.refilling ??= this.refill()
        .catch(() => {})
        .finally(() => {
          this.refilling = null
        })
      await this.refilling
      raw = await this.redis.hgetall(this.keys.catalog)
    }
    const entries = new Map<string, CatalogEntry>()
    for (const id of Object.keys(raw).sort()) entries.set(id, JSON.parse(raw[id]!) as CatalogEntry)
    this.cache = { at: now, entries }
    return entries
  }

  /** One entry by bare slug or `svc/` id; undefined when it is not on the list. */
  async get(id: string): Promise<CatalogEntry | undefined> {
    return (await this.all()).get(bareModelId(id))
  }
}
