// Catalog sync: the upstream's `/models` -> Redis, at start and on an interval. A failed sync keeps
// the catalog that is there; it never empties it.
import type { Logger } from 'pino'
import type { CatalogStore } from './store.ts'
import { mapUpstreamModels } from './venice-mapping.ts'

export interface CatalogSource {
  upstreamUrl: string
  upstreamApiKey?: string | undefined
  disabledModels: readonly string[]
}

export async function syncCatalog(store: CatalogStore, source: CatalogSource): Promise<number> {
  const url = `${source.upstreamUrl}/models?type=all`
  const headers: Record<string, string> = { accept: 'application/json' }
  if (source.upstreamApiKey) headers.authorization = `Bearer ${source.upstreamApiKey}`
  const response = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) })
  if (!response.ok) throw new Error(`upstream /models answered ${response.status}`)
  const entries = mapUpstreamModels(await response.json(), source.disabledModels)
  return store.replace(entries, source.upstreamUrl)
}

/** Syncs every `seconds`; returns a function that stops the loop. */
export function startCatalogSync(
  store: CatalogStore,
  source: CatalogSource,
  seconds: number,
  logger: Logger,
): () => void {
  const timer = setInterval(() => {
    syncCatalog(store, source).then(
      (count) => logger.debug({ count }, 'catalog synced'),
      (error: Error) =>
        logger.warn({ err: error.message }, 'catalog sync failed; keeping the current catalog'),
    )
  }, seconds * 1000)
  timer.unref()
  return () => clearInterval(timer)
}
