// The operator's routes (/admin/v1: accounts and offers, behind the admin token) for the OpenAPI
// document; merged into OPERATIONS.
import { idempotencyKey, type Operation, ok } from './operation-parts.ts'

export const ADMIN_OPERATIONS: Record<string, Operation> = {
  'POST /admin/v1/accounts': {
    summary: 'Create an account and its first key',
    tags: ['operator'],
    security: 'adminToken',
    ok: ok('accountId, wallet, apiKey', '201'),
    errors: ['BadRequest', 'Unauthorized', 'Conflict'],
  },
  'POST /admin/v1/accounts/{accountId}/credit': {
    summary: 'Credit an account by hand (audited)',
    tags: ['operator'],
    security: 'adminToken',
    parameters: [
      idempotencyKey(
        false,
        'the same key again credits nothing more and answers the first credit (its auditId, the balances now; Idempotent-Replayed: true), with another amount 409 idempotency_key_reused; without one, every call credits',
      ),
    ],
    errors: ['BadRequest', 'Unauthorized', 'NotFound', 'Conflict'],
  },
  'GET /admin/v1/accounts/{accountId}': {
    summary: 'An account and all its balances',
    tags: ['operator'],
    security: 'adminToken',
    errors: ['Unauthorized', 'NotFound'],
  },
  'POST /admin/v1/offers': {
    summary: 'Post an offer (the upstream key goes in and never comes out)',
    tags: ['operator'],
    security: 'adminToken',
    parameters: [
      idempotencyKey(
        false,
        'the same key again with the same fields creates nothing and answers the offer it made (as it stands now; Idempotent-Replayed: true), with other fields 409 idempotency_key_reused (its offerId named); without one, every call creates an offer',
      ),
    ],
    ok: ok('The offer', '201'),
    errors: ['BadRequest', 'Unauthorized', 'NotFound', 'Conflict'],
  },
  'GET /admin/v1/offers': {
    summary: 'Every offer',
    tags: ['operator'],
    security: 'adminToken',
    errors: ['Unauthorized'],
  },
  'GET /admin/v1/offers/{id}': {
    summary: 'One offer',
    tags: ['operator'],
    security: 'adminToken',
    errors: ['Unauthorized', 'NotFound'],
  },
  'PATCH /admin/v1/offers/{id}': {
    summary: 'Update, pause or resume an offer',
    description:
      "A supplier's offer keeps the upstream key and URL it was posted with (its supplier is paid for what that key serves): changing them is a 409 supplier_offer_upstream; its ask, capacity, status and label may change.",
    tags: ['operator'],
    security: 'adminToken',
    errors: ['BadRequest', 'Unauthorized', 'NotFound', 'Conflict'],
  },
  'DELETE /admin/v1/offers/{id}': {
    summary: 'Delete an offer',
    tags: ['operator'],
    security: 'adminToken',
    errors: ['Unauthorized', 'NotFound'],
  },
}
