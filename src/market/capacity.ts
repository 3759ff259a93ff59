// The capacity snapshot of GET /v1/capacity: the ladder grouped by ask, as the router sees it (the
// capacity script shares admit's eligibility rule), cached 30 s in Redis so every replica answers
// the same snapshot.
import type { Modality } from '../catalog/entry.ts'
import type { CatalogStore } from '../catalog/store.ts'
import { costAtAsk, formatMicros, type MicroDiem } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { LadderView } from './ladder-view.ts'
import { ASK_MAX_CENTS } from './offers.ts'
import { ownerKeyspaces } from './two-phase.ts'

export const CAPACITY_CACHE_SECONDS = 30

export interface CapacityRow {
  priceCentsPerDollar: number
  routableDiem: string
  usdcToBuyAll: string
}

export interface CapacitySnapshot {
  generatedAt: string
  routableDiem: string
  usdcToBuyAll: string
  cheapestPostedCents: number | null
  prices: CapacityRow[]
  modalities: Record<Modality, { available: boolean; liveModels: number }>
}

/** Routable micro-DIEM by ask, cheapest first, for live offers at or below the max. */
export async function ladderDepth(
  store: Store,
  keys: Keyspace,
  maxPriceCents: number,
): Promise<Map<number, number>> {
  if (keys.layout === 'apart') return apartDepth(store, keys, maxPriceCents)
  const flat = (await runScript(store, 'capacity', [keys.base], { maxPriceCents })) as (string | number)[]
  const depth = new Map<number, number>()
  for (let i = 0; i < flat.length; i += 2) {
    const ask = Number(flat[i])
    depth.set(ask, (depth.get(ask) ?? 0) + Number(flat[i + 1]))
  }
  return depth
}

/** The same depth for a market held apart: its offers on slots of their own, read through a view. */
async function apartDepth(store: Store, keys: Keyspace, maxPriceCents: number): Promise<Map<number, number>> {
  const view = new LadderView(store, keys, ownerKeyspaces(keys.prefix))
  await view.refresh()
  const depth = new Map<number, number>()
  for (const offer of view.current) {
    if (!offer.live || offer.ask > maxPriceCents || offer.routable <= 0) continue
    depth.set(offer.ask, (depth.get(offer.ask) ?? 0) + offer.routable)
  }
  return depth
}

async function modalities(catalog: CatalogStore): Promise<CapacitySnapshot['modalities']> {
  const counts: Record<Modality, number> = { text: 0, image: 0, video: 0 }
  for (const entry of (await catalog.all()).values()) {
    if (entry.row.status === 'live') counts[entry.row.modality] += 1
  }
  const block = (n: number) => ({ available: n > 0, liveModels: n })
  return { text: block(counts.text), image: block(counts.image), video: block(counts.video) }
}

async function compute(
  store: Store,
  keys: Keyspace,
  catalog: CatalogStore,
  max: number,
): Promise<CapacitySnapshot> {
  const depth = await ladderDepth(store, keys, max)
  let routable = 0
  let usdc = 0
  const prices: CapacityRow[] = []
  for (const [ask, diem] of depth) {
    const cost = costAtAsk(diem as MicroDiem, ask)
    routable += diem
    usdc += cost
    prices.push({
      priceCentsPerDollar: ask,
      routableDiem: formatMicros(diem),
      usdcToBuyAll: formatMicros(cost),
    })
  }
  return {
    generatedAt: new Date().toISOString(),
    routableDiem: formatMicros(routable),
    usdcToBuyAll: formatMicros(usdc),
    cheapestPostedCents: prices[0]?.priceCentsPerDollar ?? null,
    prices,
    modalities: await modalities(catalog),
  }
}

/** The snapshot for a max price (or the whole corridor), from the shared cache when fresh. */
export async function capacitySnapshot(
  store: Store,
  keys: Keyspace,
  catalog: CatalogStore,
  maxPriceCents: number | null,
): Promise<{ snapshot: CapacitySnapshot; ageSeconds: number }> {
  const cacheKey = keys.capacitySnapshot(maxPriceCents ?? 'all')
  const cached = await store.get(cacheKey)
  if (cached) return fromCache(cached)
  const snapshot = await compute(store, keys, catalog, maxPriceCents ?? ASK_MAX_CENTS)
  const text = JSON.stringify(snapshot)
  // First writer wins, so replicas that computed at the same moment all answer its snapshot.
  const stored = await store.set(cacheKey, text, 'EX', CAPACITY_CACHE_SECONDS, 'NX')
  if (stored === 'OK') return { snapshot, ageSeconds: 0 }
  return fromCache((await store.get(cacheKey)) ?? text)
}

function fromCache(text: string): { snapshot: CapacitySnapshot; ageSeconds: number } {
  const snapshot = JSON.parse(text) as CapacitySnapshot
  const age = Math.max(0, Math.floor((Date.now() - Date.parse(snapshot.generatedAt)) / 1000))
  return { snapshot, ageSeconds: Math.min(age, CAPACITY_CACHE_SECONDS) }
}
