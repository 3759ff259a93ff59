// The shared parts of the OpenAPI document: the error shape, the X-Svc-* headers, the security
// schemes and one reusable response per error status of the contract (section 7).
import { t } from 'elysia'
import { LIMIT_RESETS } from '../../accounts/budget-periods.ts'

const errorSchema = t.Object(
  {
    error: t.Object(
      {
        message: t.String({ description: 'what went wrong, for a person' }),
        type: t.String({ description: 'invalid_request_error, authentication_error, capacity_error ...' }),
        code: t.String({ description: 'the stable code to branch on (section 7 of the contract)' }),
        supportReference: t.Optional(t.String({ description: 'set when an attempt was recorded' })),
        buyerMaxCents: t.Optional(t.Number({ description: 'no_eligible_supply: your max price' })),
        cheapestPostedCents: t.Optional(
          t.Number({ description: 'no_eligible_supply: PATCH /v1/agent/max-price to this value' }),
        ),
        routableDiemAboveMax: t.Optional(
          t.String({ description: 'no_eligible_supply: depth above your max' }),
        ),
        eligibleRoutableDiem: t.Optional(t.String({ description: 'insufficient_routable_at_price' })),
        maxEligibleOfferDiem: t.Optional(t.String({ description: 'insufficient_routable_at_price' })),
        credited: t.Optional(t.Boolean({ description: '409 on funding: the payment was credited' })),
        reconciling: t.Optional(
          t.Boolean({ description: '409 on funding: the credit is queued from the chain' }),
        ),
        transaction: t.Optional(t.String({ description: '409 on funding: quote it to support' })),
      },
      { additionalProperties: true },
    ),
  },
  { description: 'Every error: {"error": {"message", "type", "code", ...}}' },
)

/** The error shape under /v1/messages: Anthropic's, with the contract's fields beside its own. */
const messagesErrorSchema = t.Object({
  type: t.Literal('error'),
  error: t.Object(
    {
      type: t.String({
        description:
          'invalid_request_error, authentication_error, billing_error, permission_error, not_found_error, request_too_large, rate_limit_error, api_error, overloaded_error',
      }),
      message: t.String(),
      code: t.String({ description: 'the contract code, as on chat' }),
    },
    { additionalProperties: true },
  ),
  request_id: t.String({ description: 'the X-Svc-Request-Id of the response, as Anthropic gives it' }),
})

const paymentChallengeSchema = t.Object(
  {
    x402Version: t.Number(),
    error: t.Optional(t.String()),
    accepts: t.Array(t.Object({}, { additionalProperties: true }), {
      description:
        'x402 payment requirements (exact scheme, USDC, EIP-3009): sign one and retry with X-PAYMENT',
    }),
  },
  { additionalProperties: true },
)

const header = (description: string, type: 'string' | 'integer' = 'string') => ({
  description,
  schema: { type },
})

export const HEADERS = {
  RequestId: header(
    "X-Svc-Request-Id: on every response, also as X-Request-Id and Request-Id (the names OpenAI's and Anthropic's SDKs read)",
  ),
  SupportReference: header(
    'X-Svc-Support-Reference: when an attempt was recorded; resolve it at GET /v1/agent/requests/{supportReference}',
  ),
  CostUsdc: header('X-Svc-Cost-Usdc: what the request cost, 6 decimals (buffered 200 only)'),
  ClearingPriceCents: header('X-Svc-Clearing-Price-Cents: the winning ask (buffered 200 only)', 'integer'),
  BalanceRemaining: header('X-Balance-Remaining: confirmed USDC after the charge'),
  ErrorCode: header('X-Svc-Error-Code: the error.code, as a header'),
  BuyerMaxCents: header('X-Svc-Buyer-Max-Cents (no_eligible_supply)', 'integer'),
  CheapestPostedCents: header('X-Svc-Cheapest-Posted-Cents (no_eligible_supply)', 'integer'),
  RoutableDiemAboveMax: header('X-Svc-Routable-Diem-Above-Max (no_eligible_supply)'),
  MaxEligibleOfferDiem: header('X-Svc-Max-Eligible-Offer-Diem (insufficient_routable_at_price)'),
  RetryAfter: header('Retry-After: seconds to wait before retrying', 'integer'),
}

type HeaderName = keyof typeof HEADERS
const HEADER_NAMES: Record<HeaderName, string> = {
  RequestId: 'X-Svc-Request-Id',
  SupportReference: 'X-Svc-Support-Reference',
  CostUsdc: 'X-Svc-Cost-Usdc',
  ClearingPriceCents: 'X-Svc-Clearing-Price-Cents',
  BalanceRemaining: 'X-Balance-Remaining',
  ErrorCode: 'X-Svc-Error-Code',
  BuyerMaxCents: 'X-Svc-Buyer-Max-Cents',
  CheapestPostedCents: 'X-Svc-Cheapest-Posted-Cents',
  RoutableDiemAboveMax: 'X-Svc-Routable-Diem-Above-Max',
  MaxEligibleOfferDiem: 'X-Svc-Max-Eligible-Offer-Diem',
  RetryAfter: 'Retry-After',
}

/** Header references by their wire names, for a response's `headers`. */
export function headers(...names: HeaderName[]) {
  return Object.fromEntries(
    (['RequestId', ...names] as HeaderName[]).map((name) => [
      HEADER_NAMES[name],
      { $ref: `#/components/headers/${name}` },
    ]),
  )
}

const json = (schema: unknown) => ({ 'application/json': { schema } })

const usdc = (description: string) => t.String({ description: `${description}, USDC as a decimal string` })
const orNull = <S extends ReturnType<typeof t.String>>(schema: S) => t.Union([schema, t.Null()])

/** A key's spending limit and where it stands (accounts/views.ts spendingView). */
const keyBudgetSchema = t.Object({
  limitUsdc: orNull(
    usdc("the spending limit (null: none): for the key's lifetime, or per period of limitReset"),
  ),
  limitReset: t.Union([...LIMIT_RESETS.map((kind) => t.Literal(kind)), t.Null()], {
    description:
      'how often the limit resets, at 00:00 UTC: daily, weekly (each Monday, ISO weeks) or monthly (the 1st); null: a lifetime limit (or none)',
  }),
  spentUsdc: usdc('charged through the key, ever'),
  periodSpentUsdc: orNull(usdc('charged in the current period of a periodic limit (null without one)')),
  limitResetsAt: orNull(
    t.String({
      format: 'date-time',
      description: 'when the current period ends (null without a periodic limit)',
    }),
  ),
  limitRemainingUsdc: orNull(
    usdc(
      'what new requests may still hold: the limit less what was spent (in the period) and what is held in flight',
    ),
  ),
})

/** An active key as GET /v1/agent/keys lists it and PATCH answers it. */
const apiKeySchema = t.Composite([
  t.Object({
    id: t.String(),
    name: t.String(),
    keyPrefix: t.String({ description: 'the first 12 characters of the key' }),
    createdAt: t.String({ format: 'date-time' }),
    lastUsedAt: t.Union([t.String({ format: 'date-time' }), t.Null()]),
  }),
  keyBudgetSchema,
])
const errorResponse = (description: string, ...extra: HeaderName[]) => ({
  description,
  headers: headers(...extra),
  content: json({ $ref: '#/components/schemas/Error' }),
})

export const ERROR_RESPONSES = {
  BadRequest: errorResponse('Invalid request: malformed JSON, a field out of range, a non-live model'),
  Unauthorized: errorResponse('Missing or invalid Bearer credentials; cookies are not accepted'),
  InsufficientBalance: errorResponse(
    'Confirmed USDC too low (no accepts): refill, wait for confirmation, retry. No money moved',
    'SupportReference',
  ),
  PaymentChallenge: {
    description: 'x402 payment challenge: the body has accepts; sign one and retry. No money moved',
    headers: headers(),
    content: json({ $ref: '#/components/schemas/PaymentChallenge' }),
  },
  Forbidden: errorResponse(
    "payer_mismatch on funding: the paying wallet is not the Bearer account. key_limit_exceeded on inference: the request's worst case would take the key past its spending limit (never a 402: funding does not help); raise it with PATCH /v1/agent/keys/{id} or lower max_tokens. key_limit_binding on /v1/agent/keys, max-price and webhooks: a limited key may not raise or remove a limit, change a limitReset, change or revoke a key without one, nor mint a key without a limit within what it has left whose periods each hold whole periods of its own, nor change the account's max price or register, remove, disable, enable or rotate the secret of its webhook endpoints (nothing changed). supplier_suspended on supplier routes (no offer posted or activated, no payout). origin_not_allowed on /mcp: an Origin header other than the gateway's own",
    'SupportReference',
  ),
  NotFound: errorResponse('Not found: unknown model, key, reference or route'),
  MethodNotAllowed: errorResponse('Method not allowed'),
  Gone: errorResponse('Video media gone: the job was refunded (the supplier failed it) or expired'),
  Conflict: errorResponse(
    'At the 10-key cap (POST /v1/agent/keys: nothing paid), a key limit below what the key spent and holds (PATCH /v1/agent/keys/{id}: key_limit_below_spent, nothing changed), or on funding: money moved but the request did not finish (credited / reconciling / transaction). Never pay again. On supplier routes: upstream_key_in_use, offer_limit, payout_exceeds_payable or idempotency_key_reused (nothing changed)',
  ),
  TooManyRequests: errorResponse(
    'key_concurrency_limit, buyer_concurrency_limit, signup_fuse (the signup fuse), nonce_rate_limited (sign-in nonces) or key_check_rate_limited (upstream key checks of offer posts): wait Retry-After seconds',
    'RetryAfter',
    'SupportReference',
  ),
  ServerError: errorResponse(
    'internal_error or settle_failed: no charge when the clear does not commit; safe to retry',
    'SupportReference',
  ),
  BadGateway: errorResponse(
    'Provider error: the upstream could not complete; safe to retry',
    'SupportReference',
  ),
  ServiceUnavailable: errorResponse(
    'No supply: no_eligible_supply (raise the max price to cheapestPostedCents), pool_empty (wait), insufficient_routable_at_price (smaller job or later), key_wait_timeout (retry)',
    'SupportReference',
    'ErrorCode',
    'BuyerMaxCents',
    'CheapestPostedCents',
    'RoutableDiemAboveMax',
    'MaxEligibleOfferDiem',
  ),
}

export type ErrorResponseName = keyof typeof ERROR_RESPONSES

const STATUS: Record<ErrorResponseName, string> = {
  BadRequest: '400',
  Unauthorized: '401',
  InsufficientBalance: '402',
  PaymentChallenge: '402',
  Forbidden: '403',
  NotFound: '404',
  MethodNotAllowed: '405',
  Gone: '410',
  Conflict: '409',
  TooManyRequests: '429',
  ServerError: '500',
  BadGateway: '502',
  ServiceUnavailable: '503',
}

/** Error responses of an operation, by name, keyed by their status. */
export function errors(...names: ErrorResponseName[]) {
  return Object.fromEntries(names.map((name) => [STATUS[name], { $ref: `#/components/responses/${name}` }]))
}

export const COMPONENTS = {
  schemas: {
    Error: errorSchema,
    MessagesError: messagesErrorSchema,
    PaymentChallenge: paymentChallengeSchema,
    ApiKey: apiKeySchema,
  },
  headers: HEADERS,
  responses: ERROR_RESPONSES,
  securitySchemes: {
    apiKey: {
      type: 'http',
      scheme: 'bearer',
      description: 'An API key: Authorization: Bearer svc_...',
    },
    adminToken: { type: 'http', scheme: 'bearer', description: 'The operator token (SVC_ADMIN_TOKEN)' },
    supplierKey: {
      type: 'http',
      scheme: 'bearer',
      description: 'A supplier key from Sign-In with Ethereum: Authorization: Bearer sup_...',
    },
    anthropicKey: {
      type: 'apiKey',
      in: 'header',
      name: 'x-api-key',
      description: "The same svc_ API key, as Anthropic's clients send it (/v1/messages)",
    },
    x402: {
      type: 'apiKey',
      in: 'header',
      name: 'X-PAYMENT',
      description: 'An x402 payment (v1 X-PAYMENT, v2 PAYMENT-SIGNATURE) answering the 402 challenge',
    },
  },
}
