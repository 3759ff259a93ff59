// The webhook routes' operations for the OpenAPI document, the same for a buyer account
// (/v1/agent, svc_ key) and a supplier (/v1/supplier, sup_ key); merged into OPERATIONS.
import { idempotencyKey, type Operation, ok, PAGE_PARAMETERS, type Security } from './operation-parts.ts'

const SIGNING =
  'Each delivery is a POST of {id, type, createdAt, data} with svc-webhook-id, svc-webhook-timestamp (Unix seconds) and svc-webhook-signature: "v1," + base64 HMAC-SHA256 over "<id>.<timestamp>.<raw body>", keyed with the bytes the base64 of the endpoint secret after whsec_ decodes to (as Standard Webhooks libraries verify it); after a rotation, while the overlap of the previous secrets (those it replaced) lasts, one "v1,<signature>" per signing secret, space-separated, the current one first (accept the delivery when any verifies). At least once: dedup by id. Retried with exponential backoff until a 2xx; redirects are not followed. A 410 Gone unsubscribes: that try ends the event at the endpoint as failed, and the endpoint is disabled (disabled: {reason: "answered 410 Gone", at}); no event is sent to it while disabled (those written meanwhile are dropped for it, never sent nor retried, and logged as skipped) until PATCH .../webhooks/{id} {"disabled": false}.'

function webhookOperations(
  prefix: string,
  tag: string,
  security: Security,
  events: string,
  /** Who may not register or remove endpoints, and the error's name in `errors`. */
  bound: { note: string; errors: ['Forbidden'] | [] },
): Record<string, Operation> {
  return {
    [`POST ${prefix}/webhooks`]: {
      summary: `Register a webhook endpoint for events (${events}); the signing secret is shown once; 409 past 5`,
      description: `url must be a public http(s) URL: one that resolves to loopback, private, link-local, unique-local, multicast or unspecified addresses is a 400 (checked again at each delivery). balance.low needs balanceThresholdUsdc (a decimal string) and fires when a request takes the confirmed balance below it.${bound.note} ${SIGNING}`,
      tags: [tag],
      security,
      ok: ok(
        'The endpoint: id, url, events, balanceThresholdUsdc, createdAt, disabled (null), secret',
        '201',
      ),
      errors: ['BadRequest', 'Unauthorized', ...bound.errors, 'Conflict'],
    },
    [`GET ${prefix}/webhooks`]: {
      summary:
        'The webhook endpoints (never their secrets), each with disabled: null or {reason, at}, secretRotatedAt, previousSecretsSignUntil',
      description:
        'disabled says why no event is sent to the endpoint: "answered 410 Gone" (its receiver unsubscribed) or "disabled by its owner"; at is when, Unix ms as createdAt.',
      tags: [tag],
      security,
      errors: ['Unauthorized'],
    },
    [`DELETE ${prefix}/webhooks/{id}`]: {
      summary: 'Remove a webhook endpoint: no more events are written for it',
      description: bound.note.trim() || undefined,
      tags: [tag],
      security,
      errors: ['Unauthorized', ...bound.errors, 'NotFound'],
    },
    [`PATCH ${prefix}/webhooks/{id}`]: {
      summary: 'Disable or enable a webhook endpoint: {"disabled": true|false}; answers the endpoint',
      description: `Enabling one a 410 Gone disabled sends it the events written from then on (not those dropped while it was disabled; replay one to send it). Disabling an endpoint already disabled keeps its reason.${bound.note}`,
      tags: [tag],
      security,
      ok: ok('The endpoint: id, url, events, balanceThresholdUsdc, createdAt, disabled'),
      errors: ['BadRequest', 'Unauthorized', ...bound.errors, 'NotFound'],
    },
    [`POST ${prefix}/webhooks/{id}/rotate-secret`]: {
      summary:
        "Rotate the endpoint's signing secret: the new one is shown once; the previous one keeps signing beside it for overlapSeconds (default 86400)",
      description: `Body (optional) {"overlapSeconds": 0..604800}: each delivery from now on is signed by the new secret, and until then also by the previous secrets, those it replaced (each keeps an earlier end of its own; at most 3 of them). 0 ends every previous secret now (one that leaked). GET .../webhooks shows secretRotatedAt and previousSecretsSignUntil (Unix ms; null once only the current secret signs). Refusals change nothing: 400 (overlapSeconds not a whole number in range, invalid_idempotency_key), 404 webhook_not_found (another owner's endpoint too), 409 idempotency_key_reused.${bound.note}`,
      tags: [tag],
      security,
      parameters: [
        idempotencyKey(
          false,
          'the same key again rotates nothing more and answers the secret it made (Idempotent-Replayed: true) while that secret is current; with another overlapSeconds, or once a later rotation replaced it, 409 idempotency_key_reused; without one, every call rotates',
        ),
      ],
      ok: ok(
        'The endpoint: id, url, events, balanceThresholdUsdc, createdAt, disabled, secretRotatedAt, previousSecretsSignUntil, secret (the new one)',
      ),
      errors: ['BadRequest', 'Unauthorized', ...bound.errors, 'NotFound', 'Conflict'],
    },
    [`GET ${prefix}/webhooks/{id}/deliveries`]: {
      summary:
        'The endpoint\'s delivery log, newest first (last 100 tries): event, attempt, outcome, HTTP status; an event dropped while it was disabled has skipped: "endpoint disabled"',
      tags: [tag],
      security,
      errors: ['Unauthorized', 'NotFound'],
    },
    [`GET ${prefix}/events`]: {
      summary: 'The recent events, newest first, with their delivery state: object list, data[], nextCursor',
      description:
        'Each item: id (what a delivery\'s svc-webhook-id says), type, at, data, and deliveries[]: for each endpoint the event goes to, endpointId, state (delivered, failing: retries go on, skipped: dropped for it while it was disabled, unknown: no try logged yet or no longer in the log), reason (why skipped: "endpoint disabled"; else null), attempt, httpStatus, error, at (of the last try). Written only while an endpoint subscribes to the type; the stream keeps about the last 10,000. Pass nextCursor as before for the next page.',
      tags: [tag],
      security,
      parameters: PAGE_PARAMETERS,
      errors: ['BadRequest', 'Unauthorized'],
    },
    [`POST ${prefix}/webhooks/{id}/deliveries/{eventId}/replay`]: {
      summary: 'Send one event to the endpoint again, now; answers the try as logged',
      tags: [tag],
      security,
      errors: ['Unauthorized', 'NotFound'],
    },
  }
}

export const WEBHOOK_OPERATIONS: Record<string, Operation> = {
  ...webhookOperations(
    '/v1/agent',
    'agent',
    'apiKey',
    'balance.low, key.budget.80, key.budget.100, funding.confirmed, funding.reversed',
    {
      note: ' A key with a spending limit may list endpoints and their deliveries but not register, remove, disable, enable or rotate them, nor replay an event to them (403 key_limit_binding).',
      errors: ['Forbidden'],
    },
  ),
  ...webhookOperations(
    '/v1/supplier',
    'supplier',
    'supplierKey',
    'payout.confirmed, payout.failed, supplier.suspended, supplier.reinstated',
    { note: '', errors: [] },
  ),
}
