// The records' routes: GET /v1/agent/requests/{support_reference} (Bearer; the owner only, 404
// for anyone else, for an unknown or a malformed reference alike) and GET /v1/models/stats
// (public). Registered ahead of the catalog routes so /v1/models/stats is never read as a model id.
import { Elysia } from 'elysia'
import { notFound } from '../../errors.ts'
import { lookupRequest } from '../../records/lookup.ts'
import { cachedModelStats, STATS_CACHE_SECONDS } from '../../records/stats.ts'
import { type AuthDeps, buyerAuth } from '../auth.ts'
import { windowQuery } from '../paging.ts'

export interface RecordsRouteDeps extends AuthDeps {
  statsMinRequests: number
}

export function recordsRoutes(deps: RecordsRouteDeps) {
  return new Elysia({ name: 'svc/records', seed: deps.keys.prefix })
    .use(buyerAuth(deps))
    .get(
      '/v1/agent/requests/:supportReference',
      async ({ buyer, params }) => {
        const view = await lookupRequest(deps.store, deps.keys, buyer.accountId, params.supportReference)
        if (!view)
          throw notFound('no request with this support reference on this account', 'request_not_found')
        return view
      },
      { buyer: true },
    )
    .get('/v1/models/stats', async ({ query, set }) => {
      const window = windowQuery(query)
      set.headers['cache-control'] = `public, max-age=${STATS_CACHE_SECONDS}`
      return cachedModelStats(deps.store, deps.keys, window, deps.statsMinRequests)
    })
}
