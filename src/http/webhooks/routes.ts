// Webhook endpoints, the same routes for a buyer account (/v1/agent/webhooks, its svc_ key) and a
// supplier (/v1/supplier/webhooks, its sup_ key): register (the secret shown once), list, remove,
// read an endpoint's delivery log and replay one event to it; and the owner's recent events
// (/v1/agent/events, /v1/supplier/events) with each endpoint's delivery state.
import { Elysia, t } from 'elysia'
import { WEBHOOK_URL_MAX } from '../../webhooks/address-check.ts'
import type { WebhookDeliveries } from '../../webhooks/delivery.ts'
import type { WebhookStore } from '../../webhooks/endpoints.ts'
import { endpointView } from '../../webhooks/endpoints.ts'
import { accountOwner, type Owner, supplierOwner } from '../../webhooks/events.ts'
import { type AuthDeps, buyerAuthenticator, callerMacro } from '../auth.ts'
import { pageQuery } from '../paging.ts'
import { supplierAuthenticator } from '../supplier/auth.ts'

export interface WebhookRouteDeps extends AuthDeps {
  webhooks: WebhookStore
  deliveries: WebhookDeliveries
}

const createBody = t.Object(
  {
    url: t.String({ minLength: 1, maxLength: WEBHOOK_URL_MAX }),
    events: t.Array(t.String({ maxLength: 64 }), { minItems: 1, maxItems: 16 }),
    // Money on the wire is a decimal string: a JSON number is a wrong type here.
    balanceThresholdUsdc: t.Optional(t.String({ maxLength: 32 })),
  },
  { additionalProperties: false },
)
const idParams = t.Object({ id: t.String({ maxLength: 64 }) })
const replayParams = t.Object({ id: t.String({ maxLength: 64 }), eventId: t.String({ maxLength: 64 }) })

function routesFor(
  deps: WebhookRouteDeps,
  prefix: string,
  authenticate: (request: Request) => Promise<Owner>,
) {
  const { webhooks, deliveries } = deps
  return new Elysia({ name: `svc/webhooks${prefix}`, prefix, seed: deps.keys.prefix })
    .macro('owner', callerMacro('owner', authenticate))
    .post('/webhooks', async ({ owner, body, status }) => status(201, await webhooks.create(owner, body)), {
      owner: true,
      body: createBody,
    })
    .get('/webhooks', async ({ owner }) => ({ webhooks: (await webhooks.list(owner)).map(endpointView) }), {
      owner: true,
    })
    .delete(
      '/webhooks/:id',
      async ({ owner, params }) => {
        await webhooks.remove(owner, params.id)
        return { status: 'ok' as const }
      },
      { owner: true, params: idParams },
    )
    .get(
      '/webhooks/:id/deliveries',
      async ({ owner, params }) => {
        const endpoint = await webhooks.get(owner, params.id)
        return { deliveries: await deliveries.log(owner, endpoint.id) }
      },
      { owner: true, params: idParams },
    )
    .get(
      '/events',
      ({ owner, query }) => {
        const { limit, before } = pageQuery(query)
        return deliveries.events(owner, limit, before)
      },
      { owner: true },
    )
    .post(
      '/webhooks/:id/deliveries/:eventId/replay',
      async ({ owner, params }) => {
        const endpoint = await webhooks.get(owner, params.id)
        return deliveries.replay(owner, endpoint, params.eventId)
      },
      { owner: true, params: replayParams },
    )
}

/** /v1/agent/webhooks... behind the buyer's svc_ key. */
export function agentWebhookRoutes(deps: WebhookRouteDeps) {
  const buyer = buyerAuthenticator(deps)
  return routesFor(deps, '/v1/agent', async (request) => accountOwner((await buyer(request)).accountId))
}

/** /v1/supplier/webhooks... behind the supplier's sup_ key. */
export function supplierWebhookRoutes(deps: WebhookRouteDeps) {
  const supplier = supplierAuthenticator(deps)
  return routesFor(deps, '/v1/supplier', async (request) =>
    supplierOwner((await supplier(request)).supplierId),
  )
}
