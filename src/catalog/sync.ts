// Catalog sync: the upstream's `/models` (its video models priced by its quote endpoint) -> Redis,
// at start and on an interval. A failed sync keeps the catalog that is there; it never empties it.
// On the interval one replica syncs for the market: the first to claim the period does it, so more
// replicas ask the upstream no more often; a failed sync gives the claim back for another's turn.
import type { Logger } from 'pino'
import { readCapped } from '../read-capped.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { type Every, onTimer } from '../timing/every.ts'
import type { CatalogStore } from './store.ts'
import { mapUpstreamModels } from './venice-mapping.ts'
import { priceVideoModels } from './video-prices.ts'

export interface CatalogSource {
  upstreamUrl: string
  /** Sent to `/models`, and the key the video quotes are asked with (without it no video model is live). */
  upstreamApiKey?: string | undefined
  disabledModels: readonly string[]
  /** Told the disabled ids that name no model the upstream lists (the start's sync warns of them). */
  unmatchedDisabled?: (ids: string[]) => void
  /** How long one ask may take, its whole answer read: past it the sync fails (default 10 s). */
  timeoutMs?: number
}

export async function syncCatalog(store: CatalogStore, source: CatalogSource): Promise<number> {
  const url = `${source.upstreamUrl}/models?type=all`
  const headers: Record<string, string> = { accept: 'application/json' }
  if (source.upstreamApiKey) headers.authorization = `Bearer ${source.upstreamApiKey}`
  // Taken before asking: a slower sync that asked earlier cannot overwrite this one's newer list.
  const ticket = await store.ticket()
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(source.timeoutMs ?? 10_000) })
  if (!response.ok) throw new Error(`upstream /models answered ${response.status}`)
  const entries = mapUpstreamModels(
    JSON.parse(await cappedText(response)),
    source.disabledModels,
    source.unmatchedDisabled,
  )
  // Read as stored: the catalog's own read refills an empty catalog by this sync.
  const known = source.upstreamApiKey ? undefined : await store.stored()
  return store.replace(await priceVideoModels(entries, source, known), source.upstreamUrl, ticket)
}

/** The most bytes a `/models` answer may have: a list past it is refused, unread past the cap. */
const MAX_LIST_BYTES = 16 * 1024 * 1024

async function cappedText(response: Response): Promise<string> {
  if (!response.body) return ''
  const tooLarge = () => new Error(`upstream /models is larger than ${MAX_LIST_BYTES} bytes`)
  return (await readCapped(response.body, MAX_LIST_BYTES, tooLarge)).toString('utf8')
}

/** Whether this replica syncs this period: the claim was free, and is now its own for `ttlMs`. */
export async function claimCatalogSync(
  store: Store,
  keys: Keyspace,
  ttlMs: number,
  replica: string,
): Promise<boolean> {
  return (await store.call('SET', keys.catalogSyncClaim, replica, 'PX', ttlMs, 'NX')) === 'OK'
}

/** Gives the period's claim back, if this replica still holds it. */
async function releaseCatalogSync(store: Store, keys: Keyspace, replica: string): Promise<void> {
  if ((await store.get(keys.catalogSyncClaim)) === replica) await store.del(keys.catalogSyncClaim)
}

export interface CatalogSyncLoop {
  store: Store
  keys: Keyspace
  logger: Logger
  /** This replica's name in the claim. */
  replica: string
  every?: Every
}

/** Syncs every `seconds` when this replica claims the period; returns a function that stops the loop. */
export function startCatalogSync(
  catalog: CatalogStore,
  source: CatalogSource,
  seconds: number,
  { store, keys, logger, replica, every = onTimer }: CatalogSyncLoop,
): () => void {
  // A little under the period, so the next period's first tick finds the claim free.
  const ttlMs = Math.max(1_000, seconds * 1000 - 500)
  return every(seconds * 1000, async () => {
    try {
      if (!(await claimCatalogSync(store, keys, ttlMs, replica))) return
      const count = await syncCatalog(catalog, source)
      logger.debug({ count }, count < 0 ? 'catalog sync superseded by a newer one' : 'catalog synced')
    } catch (error) {
      logger.warn({ err: (error as Error).message }, 'catalog sync failed; keeping the current catalog')
      await releaseCatalogSync(store, keys, replica).catch(() => {})
    }
  })
}
