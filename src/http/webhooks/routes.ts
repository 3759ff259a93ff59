// Webhook endpoints, the same routes for a buyer account (/v1/agent/webhooks, its svc_ key) and a
// supplier (/v1/supplier/webhooks, its sup_ key): register (the secret shown once), list, remove,
// disable or enable (one disabled by a 410 Gone is enabled here), rotate the signing secret (the new
// one shown once), read an endpoint's delivery log and replay one event to it; and the owner's recent events
// (/v1/agent/events, /v1/supplier/events) with each endpoint's delivery state.
import { Elysia, t } from 'elysia'
import { checkedIdempotencyDigest } from '../../accounts/idempotency-key.ts'
import { ApiKeyStore } from '../../accounts/key-store.ts'
import { WEBHOOK_URL_MAX } from '../../webhooks/address-check.ts'
import type { WebhookDeliveries } from '../../webhooks/delivery.ts'
import type { WebhookStore } from '../../webhooks/endpoints.ts'
import { DISABLED_BY_OWNER, endpointView } from '../../webhooks/endpoints.ts'
import { accountOwner, type Owner, supplierOwner } from '../../webhooks/events.ts'
import { MAX_OVERLAP_SECONDS, overlapOf } from '../../webhooks/rotation.ts'
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
const patchBody = t.Object({ disabled: t.Boolean() }, { additionalProperties: false })
// No body rotates with the default overlap. A whole number as multipleOf: t.Integer would take "60".
const rotateBody = t.Union([
  t.Null(),
  t.Object(
    { overlapSeconds: t.Optional(t.Number({ multipleOf: 1, minimum: 0, maximum: MAX_OVERLAP_SECONDS })) },
    { additionalProperties: false },
  ),
])
const replayParams = t.Object({ id: t.String({ maxLength: 64 }), eventId: t.String({ maxLength: 64 }) })

/** Who may register and remove endpoints: the owner, and `mayChange` says whether this caller may. */
interface Caller {
  owner: Owner
  mayChange(): Promise<void>
}

function routesFor(
  deps: WebhookRouteDeps,
  prefix: string,
  authenticate: (request: Request) => Promise<Caller>,
) {
  const { webhooks, deliveries } = deps
  return new Elysia({ name: `svc/webhooks${prefix}`, prefix, seed: deps.keys.prefix })
    .macro('caller', callerMacro('caller', authenticate))
    .post(
      '/webhooks',
      async ({ caller, body, status }) => {
        await caller.mayChange()
        return status(201, await webhooks.create(caller.owner, body))
      },
      { caller: true, body: createBody },
    )
    .get(
      '/webhooks',
      async ({ caller: { owner } }) => ({ webhooks: (await webhooks.list(owner)).map(endpointView) }),
      {
        caller: true,
      },
    )
    .delete(
      '/webhooks/:id',
      async ({ caller, params }) => {
        await caller.mayChange()
        await webhooks.remove(caller.owner, params.id)
        return { status: 'ok' as const }
      },
      { caller: true, params: idParams },
    )
    .patch(
      '/webhooks/:id',
      async ({ caller, params, body }) => {
        await caller.mayChange()
        const reason = body.disabled ? DISABLED_BY_OWNER : null
        return endpointView(await webhooks.setDisabled(caller.owner, params.id, reason))
      },
      { caller: true, params: idParams, body: patchBody },
    )
    .post(
      '/webhooks/:id/rotate-secret',
      async ({ caller, params, body, request, set }) => {
        await caller.mayChange()
        const header = request.headers.get('idempotency-key')
        const key = header === null ? null : checkedIdempotencyDigest(header)
        const overlap = overlapOf(body?.overlapSeconds)
        const { endpoint, replayed } = await webhooks.rotateSecret(caller.owner, params.id, overlap, key)
        if (replayed) set.headers['idempotent-replayed'] = 'true'
        return endpoint
      },
      { caller: true, params: idParams, body: rotateBody },
    )
    .get(
      '/webhooks/:id/deliveries',
      async ({ caller: { owner }, params }) => {
        const endpoint = await webhooks.get(owner, params.id)
        return { deliveries: await deliveries.log(owner, endpoint.id) }
      },
      { caller: true, params: idParams },
    )
    .get(
      '/events',
      ({ caller: { owner }, query }) => {
        const { limit, before } = pageQuery(query)
        return deliveries.events(owner, limit, before)
      },
      { caller: true },
    )
    .post(
      '/webhooks/:id/deliveries/:eventId/replay',
      async ({ caller, params }) => {
        // A replay sends to the owner's endpoint again: the owner's to decide, like the endpoint itself.
        await caller.mayChange()
        const endpoint = await webhooks.get(caller.owner, params.id)
        return deliveries.replay(caller.owner, endpoint, params.eventId)
      },
      { caller: true, params: replayParams },
    )
}

/** /v1/agent/webhooks... behind the buyer's svc_ key. */
export function agentWebhookRoutes(deps: WebhookRouteDeps) {
  const buyer = buyerAuthenticator(deps)
  const apiKeys = new ApiKeyStore(deps.store, deps.keys)
  return routesFor(deps, '/v1/agent', async (request) => {
    const { accountId, keyId } = await buyer(request)
    // A key with a spending limit may read the endpoints, not change them (key-store.ts).
    return { owner: accountOwner(accountId), mayChange: () => apiKeys.requireUnlimited(accountId, keyId) }
  })
}

/** /v1/supplier/webhooks... behind the supplier's sup_ key. */
export function supplierWebhookRoutes(deps: WebhookRouteDeps) {
  const supplier = supplierAuthenticator(deps)
  return routesFor(deps, '/v1/supplier', async (request) => ({
    owner: supplierOwner((await supplier(request)).supplierId),
    mayChange: async () => {},
  }))
}
