// GET /v1/capacity: public, no supplier identity, a pre-flight view of the ladder.
import { Elysia } from 'elysia'
import type { CatalogStore } from '../../catalog/store.ts'
import { badRequest } from '../../errors.ts'
import { CAPACITY_CACHE_SECONDS, capacitySnapshot } from '../../market/capacity.ts'
import { ASK_MAX_CENTS, ASK_MIN_CENTS } from '../../market/offers.ts'
import type { Keyspace } from '../../redis/keys.ts'
import type { Store } from '../../redis/store.ts'

/** maxPriceCents: absent, or an integer 30..80; anything else is refused, never clamped. */
export function parseMaxPriceCents(raw: string | undefined): number | null {
  if (raw === undefined) return null
  if (!/^\d{1,3}$/.test(raw) || Number(raw) < ASK_MIN_CENTS || Number(raw) > ASK_MAX_CENTS) {
    throw badRequest(
      `maxPriceCents must be an integer from ${ASK_MIN_CENTS} to ${ASK_MAX_CENTS}; got '${raw.slice(0, 20)}'`,
      'invalid_max_price',
    )
  }
  return Number(raw)
}

export function capacityRoutes(deps: { store: Store; keys: Keyspace; catalog: CatalogStore }) {
  return new Elysia({ name: 'svc/capacity', seed: deps.keys.prefix }).get(
    '/v1/capacity',
    async ({ query, set }) => {
      const max = parseMaxPriceCents(query.maxPriceCents)
      const { snapshot, ageSeconds } = await capacitySnapshot(deps.store, deps.keys, deps.catalog, max)
      set.headers['cache-control'] = `public, max-age=${CAPACITY_CACHE_SECONDS - ageSeconds}`
      return snapshot
    },
  )
}
