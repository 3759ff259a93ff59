// The operator's view of the market as a whole under /admin/v1, behind the admin token: running
// totals (kept by the clear, so one read) and health (Redis, the replicas seen, the reaper).
import { Elysia } from 'elysia'
import { replicaHealth, seenWithinMs } from '../../market/replicas.ts'
import { marketTotals } from '../../market/totals.ts'
import type { Keyspace } from '../../redis/keys.ts'
import type { Store } from '../../redis/store.ts'
import { adminAuth } from '../auth.ts'

export interface AdminMarketDeps {
  store: Store
  keys: Keyspace
  config: { adminToken: string; market: { reapIntervalMs: number } }
}

export function adminMarketRoutes(deps: AdminMarketDeps) {
  const withinMs = seenWithinMs(deps.config.market.reapIntervalMs)
  return new Elysia({ name: 'svc/admin-market', prefix: '/admin/v1', seed: deps.keys.prefix })
    .use(adminAuth(deps.config.adminToken))
    .get('/market', () => marketTotals(deps.store, deps.keys), { admin: true })
    .get(
      '/health',
      async () => {
        const started = performance.now()
        await deps.store.ping()
        const pingMs = Math.round((performance.now() - started) * 100) / 100
        const { replicas, reaper } = await replicaHealth(deps.store, deps.keys, withinMs)
        return {
          object: 'health' as const,
          redis: { status: 'ok' as const, pingMs },
          replicas: { seenWithinSeconds: withinMs / 1000, count: replicas.length, data: replicas },
          reaper,
        }
      },
      { admin: true },
    )
}
