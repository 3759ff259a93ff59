// createApp(deps): the Elysia app, built the same way by `serve`, `demo` and the tests.
import { Elysia } from 'elysia'
import type { Logger } from 'pino'
import type { CatalogStore } from './catalog/store.ts'
import type { GatewayConfig } from './config.ts'
import type { ApiError } from './errors.ts'
import type { Funding } from './funding/index.ts'
import { adminMarketRoutes } from './http/admin/market.ts'
import { adminOfferRoutes } from './http/admin/offers.ts'
import { adminAccountRoutes } from './http/admin/routes.ts'
import { agentRoutes } from './http/agent/routes.ts'
import { capacityRoutes } from './http/capacity/routes.ts'
import { contractRoutes } from './http/contract/routes.ts'
import { directRoutes, type Finish } from './http/direct-routes.ts'
import { errorHandler } from './http/error-handler.ts'
import { errorResponse } from './http/errors.ts'
import { fundingRoutes } from './http/funding/routes.ts'
import { chatHandler, chatRoutes } from './http/inference/chat.ts'
import { imageRoutes } from './http/inference/images.ts'
import { messagesHandler, messagesRoutes } from './http/inference/messages.ts'
import { responsesHandler, responsesRoutes } from './http/inference/responses.ts'
import { videoRoutes } from './http/inference/video.ts'
import { boundBody } from './http/json-body.ts'
import { mcpRoutes } from './http/mcp/routes.ts'
import { metricsRoutes } from './http/metrics/routes.ts'
import { modelRoutes } from './http/models/routes.ts'
import { pageRoutes } from './http/pages/routes.ts'
import { refuseRepeatedQuery } from './http/query-once.ts'
import { recordsRoutes } from './http/records/routes.ts'
import { beginRequest, requestContext, requestIdHeaders } from './http/request-context.ts'
import { checkRequestUrl } from './http/request-url.ts'
import { supplierRoutes } from './http/supplier/routes.ts'
import { agentWebhookRoutes, supplierWebhookRoutes } from './http/webhooks/routes.ts'
import { chatBodySchema } from './inference/chat-request.ts'
import { messagesBodySchema } from './inference/messages-request.ts'
import { responsesBodySchema } from './inference/responses-request.ts'
import { InferenceService } from './inference/service.ts'
import type { ClearJournal } from './market/clear-journal.ts'
import type { LeaseRenewer } from './market/lease-renewer.ts'
import type { MarketSteps } from './market/steps.ts'
import type { UnsentClears } from './market/unsent-clears.ts'
import { metrics } from './metrics/gateway-metrics.ts'
import type { PayoutService } from './payouts/service.ts'
import type { Keyspace } from './redis/keys.ts'
import type { Store } from './redis/store.ts'
import { webhookParts } from './webhooks/endpoints.ts'

export interface AppDeps {
  config: GatewayConfig
  store: Store
  keys: Keyspace
  catalog: CatalogStore
  logger: Logger
  /** x402 funding, when configured (SVC_X402_NETWORK ...). */
  funding?: Funding
  /** Supplier payouts (always present when the gateway starts them; unavailable without a payout wallet). */
  payouts?: PayoutService
  /** Set while the replica drains on SIGTERM: /readyz says so, so balancers stop sending. */
  lifecycle?: { draining: boolean }
  /** The market's steps (default: those of `keys`' layout), shared with the replica's reaper. */
  steps?: MarketSteps
  /** Acknowledged clears kept to be sent again when a connection to Redis closes (gateway.ts). */
  journal?: ClearJournal
  unsent?: UnsentClears
  /** The leases' renewer, whose attempts in flight the replica's stop waits on (gateway.ts). */
  renewer?: LeaseRenewer
}

export function createApp(deps: AppDeps) {
  const { logger } = deps
  const inference = new InferenceService(deps)
  const webhooks = webhookParts(deps.store, deps.keys, deps.config.masterKey, deps.config.webhooks)
  // Every response's metrics and access line, once it is out.
  const finish: Finish = (request, route, path, status, failure) => {
    const context = requestContext(request)
    const seconds = (performance.now() - context.startedAt) / 1000
    metrics.requests.inc({ route, method: request.method, status: String(status) })
    metrics.latency.observe({ route }, seconds)
    // The access line is built only when it will be written (LOG_LEVEL=warn writes none).
    if (!failure && !logger.isLevelEnabled('info')) return
    const line = {
      requestId: context.id,
      supportReference: context.supportReference,
      method: request.method,
      path,
      status,
      ms: Math.round(seconds * 100_000) / 100,
      costUsdc: context.costUsdc,
    }
    if (failure) logger.error({ ...line, err: failure }, 'request failed')
    else logger.info(line, 'request')
  }
  // The paid routes, served ahead of Elysia's lifecycle by the same steps (direct-routes.ts).
  const direct = directRoutes(
    [
      { path: '/v1/chat/completions', body: chatBodySchema, handle: chatHandler(inference) },
      { path: '/v1/responses', body: responsesBodySchema, handle: responsesHandler(inference) },
      { path: '/v1/messages', body: messagesBodySchema, handle: messagesHandler(inference) },
    ],
    deps.config.maxBodyBytes,
    finish,
  )
  // normalize off: schemas that say additionalProperties: false refuse unknown fields instead of
  // silently dropping them; every other schema lets extra fields through untouched.
  return new Elysia({ name: 'svc/app', normalize: false, serve: { routes: direct } })
    .onRequest(({ request, set }) => {
      const id = beginRequest(request).id
      Object.assign(set.headers, requestIdHeaders(id))
      // An answer is kept by no browser or proxy unless its route says so (public data with a
      // max-age): the pages read an account with a Bearer key, and a stored answer would be read
      // back from the cache after a sign-out, with no key.
      set.headers['cache-control'] = 'no-store'
      try {
        checkRequestUrl(request)
        boundBody(request, deps.config.maxBodyBytes)
      } catch (error) {
        return errorResponse(error as ApiError, requestIdHeaders(id), request)
      }
    })
    .use(errorHandler)
    .onAfterResponse({ as: 'global' }, ({ request, set, path, route, responseValue }) => {
      const failure = (request as Request & { failure?: unknown }).failure
      const status = responseValue instanceof Response ? responseValue.status : Number(set.status ?? 200)
      // Route templates, never raw paths, so ids cannot blow up the label space.
      finish(request, route || 'unmatched', path, status, failure)
    })
    .onBeforeHandle({ as: 'global' }, ({ request, route }) => {
      // After the routes' own credential checks (a 401 comes first), before a handler reads its query.
      refuseRepeatedQuery(request, route)
    })
    .get('/healthz', () => ({ status: 'ok' }))
    .get('/readyz', async ({ set }) => {
      if (deps.lifecycle?.draining) {
        set.status = 503
        return { status: 'draining' }
      }
      try {
        await deps.store.ping()
        return { status: 'ready' }
      } catch {
        set.status = 503
        return { status: 'redis unreachable' }
      }
    })
    .use(recordsRoutes({ ...deps, statsMinRequests: deps.config.records.statsMinRequests }))
    .use(modelRoutes(deps.catalog))
    .use(fundingRoutes({ ...deps, defaultMaxPriceCents: deps.config.defaultMaxPriceCents }))
    .use(capacityRoutes(deps))
    .use(chatRoutes(inference))
    .use(responsesRoutes(inference))
    .use(messagesRoutes(inference))
    .use(imageRoutes(inference))
    .use(videoRoutes(inference))
    .use(metricsRoutes({ ...deps, steps: inference.steps }))
    .use(adminOfferRoutes(deps))
    .use(agentRoutes({ ...deps, recordRetentionMs: deps.config.records.recordRetentionDays * 86_400_000 }))
    .use(adminAccountRoutes(deps))
    .use(adminMarketRoutes(deps))
    .use(supplierRoutes(deps))
    .use(agentWebhookRoutes({ ...deps, ...webhooks }))
    .use(supplierWebhookRoutes({ ...deps, ...webhooks }))
    .use(pageRoutes(deps))
    .use((app) =>
      app
        .use(mcpRoutes({ ...deps, publicUrl: deps.config.publicUrl }, app))
        .use(contractRoutes(app, deps.funding !== undefined)),
    )
}

export type App = ReturnType<typeof createApp>
