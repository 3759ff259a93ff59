// The supplier side's operations (/v1/supplier/*, /admin/v1/suppliers) for the OpenAPI document;
// merged into OPERATIONS (operations.ts).
import {
  idempotencyKey,
  type Operation,
  ok,
  PAGE_PARAMETERS,
  query,
  WINDOW_PARAMETERS,
} from './operation-parts.ts'

export const SUPPLIER_OPERATIONS: Record<string, Operation> = {
  'GET /v1/supplier/nonce': {
    summary: 'A Sign-In with Ethereum nonce: single use, valid 5 minutes',
    description:
      'At most SVC_SIWE_NONCES_PER_MINUTE issued a minute across all replicas, and SVC_SIWE_NONCES_PER_CLIENT_PER_MINUTE to one client address: past either, 429 nonce_rate_limited (wait Retry-After).',
    tags: ['supplier'],
    security: 'none',
    errors: ['TooManyRequests'],
  },
  'POST /v1/supplier/signin': {
    summary: 'Sign in with Ethereum (EIP-4361): supplierId, wallet and a sup_ key shown once',
    description:
      "The message's domain must be the gateway's host and its URI on the gateway's origin (SVC_PUBLIC_URL); expirationTime and notBefore are honoured; the nonce is used up. One supplier per wallet: signing in again gives the same supplierId and a new key. At 10 active keys a sign-in replaces the oldest key a sign-in minted (its id in replacedKeyId; else null) and is a 409 only when all ten were minted by name. Refusals: 400 invalid_siwe_message / invalid_signature_format, 401 siwe_nonce_invalid, siwe_domain_mismatch, siwe_uri_mismatch, siwe_expired, siwe_not_yet_valid, siwe_invalid_signature.",
    tags: ['supplier'],
    security: 'none',
    errors: ['BadRequest', 'Unauthorized', 'Conflict'],
  },
  'GET /v1/supplier/me': {
    summary: 'The supplier: wallet, status, earned, paid out, pending and payable USDC',
    tags: ['supplier'],
    security: 'supplierKey',
    errors: ['Unauthorized'],
  },
  'GET /v1/supplier/keys': {
    summary: "The supplier's active keys (metadata only)",
    tags: ['supplier'],
    security: 'supplierKey',
    errors: ['Unauthorized'],
  },
  'POST /v1/supplier/keys': {
    summary: 'Mint a supplier key (plaintext shown once); 409 at 10 active keys',
    tags: ['supplier'],
    security: 'supplierKey',
    ok: ok('The new key: apiKey, id, name, keyPrefix', '201'),
    errors: ['BadRequest', 'Unauthorized', 'Conflict'],
  },
  'DELETE /v1/supplier/keys/{id}': {
    summary: "Revoke one of the supplier's keys",
    tags: ['supplier'],
    security: 'supplierKey',
    errors: ['Unauthorized', 'NotFound'],
  },
  'GET /v1/supplier/fills': {
    summary: "Clears on the supplier's offers, newest first: object list, data[], nextCursor",
    description:
      'Each item: createdAt, model, offerId, burnDiem, clearingPriceCents, earnedUsdc (net of the fee). Never a buyer identity.',
    tags: ['supplier'],
    security: 'supplierKey',
    parameters: PAGE_PARAMETERS,
    errors: ['BadRequest', 'Unauthorized'],
  },
  'GET /v1/supplier/earnings': {
    summary: "What the supplier's offers earned per UTC day, from its fills",
    description:
      'days[]: date, earnedUsdc (net of the fee), burnDiem, fills; totals beside. A window is that many UTC days, today so far included.',
    tags: ['supplier'],
    security: 'supplierKey',
    parameters: WINDOW_PARAMETERS,
    errors: ['BadRequest', 'Unauthorized'],
  },
  'POST /v1/supplier/offers': {
    summary: "Post an offer on the operator's upstream; the upstream key is checked, sealed, never shown",
    description:
      "400 upstream_key_rejected when the upstream's balance endpoint does not accept the key; 409 upstream_key_in_use when it stands in another offer; 403 supplier_suspended; 429 key_check_rate_limited past SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE key checks a minute per supplier (default 10), or past SVC_KEY_CHECKS_PER_MINUTE_TOTAL of all suppliers together (default 120; wait Retry-After).",
    tags: ['supplier'],
    security: 'supplierKey',
    ok: ok('The offer', '201'),
    errors: ['BadRequest', 'Unauthorized', 'Forbidden', 'Conflict', 'TooManyRequests', 'ServiceUnavailable'],
  },
  'GET /v1/supplier/offers': {
    summary: "The supplier's own offers",
    tags: ['supplier'],
    security: 'supplierKey',
    errors: ['Unauthorized'],
  },
  'GET /v1/supplier/offers/{id}': {
    summary: "One of the supplier's offers (another's is a 404)",
    tags: ['supplier'],
    security: 'supplierKey',
    errors: ['Unauthorized', 'NotFound'],
  },
  'PATCH /v1/supplier/offers/{id}': {
    summary: "Change one of the supplier's offers: askCents, capacityDiem, status active|paused",
    tags: ['supplier'],
    security: 'supplierKey',
    errors: ['BadRequest', 'Unauthorized', 'Forbidden', 'NotFound', 'Conflict'],
  },
  'DELETE /v1/supplier/offers/{id}': {
    summary: "Delete one of the supplier's offers (its upstream key may then stand in another)",
    tags: ['supplier'],
    security: 'supplierKey',
    errors: ['Unauthorized', 'NotFound'],
  },
  'POST /v1/supplier/payouts': {
    summary: "Pay out USDC on chain to the supplier's wallet (Idempotency-Key header required)",
    description:
      'Body {amountUsdc}: at least SVC_PAYOUT_MIN_USDC, at most payable. 201 with the payout (state sending; then pending once its transaction is mined, confirmed after SVC_CONFIRMATIONS, or failed: the amount is payable again). The same Idempotency-Key again answers the same payout (200, Idempotent-Replayed: true); with another amount 409 idempotency_key_reused. Refusals change nothing: 400 idempotency_key_required, invalid_idempotency_key, invalid_amount, payout_below_minimum; 403 supplier_suspended; 409 payout_exceeds_payable; 503 payouts_unavailable (no payout wallet configured).',
    tags: ['supplier'],
    security: 'supplierKey',
    parameters: [
      idempotencyKey(true, '1 to 255 visible ASCII characters; the same key answers the same payout'),
    ],
    ok: ok(
      'The payout: id, amountUsdc, wallet, state, txHash, blockNumber, error, createdAt, updatedAt',
      '201',
    ),
    errors: ['BadRequest', 'Unauthorized', 'Forbidden', 'Conflict', 'ServiceUnavailable'],
  },
  'GET /v1/supplier/payouts': {
    summary: "The supplier's payouts, newest first: object list, data[], nextCursor",
    tags: ['supplier'],
    security: 'supplierKey',
    parameters: PAGE_PARAMETERS,
    errors: ['BadRequest', 'Unauthorized'],
  },
  'GET /v1/supplier/payouts/{id}': {
    summary: "One of the supplier's payouts (another's is a 404)",
    tags: ['supplier'],
    security: 'supplierKey',
    errors: ['Unauthorized', 'NotFound'],
  },
  'GET /admin/v1/payouts': {
    summary:
      "Payouts in flight (sending, pending), oldest first, with supplier, nonce, the signing wallet (from) and signingKeyNeeded (a fee bump is due that only that wallet's key can sign: the key was rotated)",
    tags: ['operator'],
    security: 'adminToken',
    parameters: [query('state', 'only this state', { type: 'string', enum: ['sending', 'pending'] })],
    errors: ['BadRequest', 'Unauthorized'],
  },
  'GET /admin/v1/suppliers': {
    summary: 'Every supplier: wallet, status, offer count, earned, paid out, pending, payable',
    tags: ['operator'],
    security: 'adminToken',
    errors: ['Unauthorized'],
  },
  'GET /admin/v1/suppliers/{id}': {
    summary: 'One supplier',
    tags: ['operator'],
    security: 'adminToken',
    errors: ['Unauthorized', 'NotFound'],
  },
  'PATCH /admin/v1/suppliers/{id}': {
    summary: 'Suspend or reinstate a supplier (suspended: its offers leave the ladder at once)',
    tags: ['operator'],
    security: 'adminToken',
    errors: ['BadRequest', 'Unauthorized', 'NotFound'],
  },
}
