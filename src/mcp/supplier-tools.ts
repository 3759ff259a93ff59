// The MCP tools a supplier key is offered (a buyer key never sees them, nor a supplier key the
// buyer's): each one call of a /v1/supplier route with the caller's own key, as the buyer tools
// are (tools.ts).
import { t } from 'elysia'
import { IDEMPOTENCY_KEY } from '../accounts/idempotency-key.ts'
import { ASK_MAX_CENTS, ASK_MIN_CENTS } from '../market/offers.ts'
import { noInput, pageCall, pageInput, segment, type Tool, tool } from './tools.ts'

const askCents = t.Number({
  multipleOf: 1,
  minimum: ASK_MIN_CENTS,
  maximum: ASK_MAX_CENTS,
  description: `the ask, cents per dollar of capacity, ${ASK_MIN_CENTS} to ${ASK_MAX_CENTS}`,
})
const capacityDiem = t.String({
  minLength: 1,
  maxLength: 32,
  description: 'capacity to sell, DIEM as a decimal string with at most 6 decimals ("100.000000")',
})
const offerId = t.String({ minLength: 1, maxLength: 64, description: 'the offer id from list_offers' })

export const SUPPLIER_INSTRUCTIONS =
  'Sell inference capacity on the gateway. supplier_me shows earned, paid out, pending and payable ' +
  'USDC; post_offer puts an upstream key on the market at an ask; list_fills shows what cleared; ' +
  'request_payout sends payable USDC to the wallet on chain (one idempotencyKey per payout), ' +
  'list_payouts follows it; list_webhooks and list_webhook_events show the webhook endpoints and ' +
  'the events sent to them (payouts confirmed or failed, the supplier suspended or reinstated). ' +
  'Errors come back as tool errors carrying the HTTP status and the error.code of the API.'

export const SUPPLIER_TOOLS: Tool[] = [
  tool({
    name: 'supplier_me',
    description:
      'The supplier behind this key: supplier id, wallet, status, and earned, paid out, pending and payable USDC (earned = paid out + pending + payable).',
    input: noInput,
    route: 'GET /v1/supplier/me',
    call: () => ({ method: 'GET', path: '/v1/supplier/me' }),
  }),
  tool({
    name: 'list_offers',
    description:
      "The supplier's own offers: ask, status, capacity, burned, held, in flight, earned. Never the upstream key.",
    input: noInput,
    route: 'GET /v1/supplier/offers',
    call: () => ({ method: 'GET', path: '/v1/supplier/offers' }),
  }),
  tool({
    name: 'post_offer',
    description:
      "Posts an offer selling capacity of an upstream API key on the operator's upstream. The key is checked against the upstream's balance endpoint first (400 upstream_key_rejected), stored sealed and never shown again; one key stands in one offer only (409 upstream_key_in_use).",
    input: t.Object(
      {
        upstreamApiKey: t.String({
          minLength: 1,
          maxLength: 1024,
          description: 'the upstream API key to sell',
        }),
        askCents,
        capacityDiem,
        maxInFlight: t.Optional(
          t.Number({
            multipleOf: 1,
            minimum: 1,
            maximum: 100_000,
            description: 'requests in flight at once',
          }),
        ),
      },
      { additionalProperties: false },
    ),
    route: 'POST /v1/supplier/offers',
    call: (args) => ({ method: 'POST', path: '/v1/supplier/offers', body: { ...args } }),
  }),
  tool({
    name: 'update_offer',
    description:
      "Changes one of the supplier's offers by id: askCents, capacityDiem, or status (active or paused; paused leaves the market at once). At least one of them.",
    input: t.Object(
      {
        id: offerId,
        askCents: t.Optional(askCents),
        capacityDiem: t.Optional(capacityDiem),
        status: t.Optional(t.Union([t.Literal('active'), t.Literal('paused')])),
      },
      { additionalProperties: false },
    ),
    route: 'PATCH /v1/supplier/offers/:id',
    refine: (args) =>
      args.askCents === undefined && args.capacityDiem === undefined && args.status === undefined
        ? 'send askCents, capacityDiem or status'
        : null,
    call: ({ id, ...change }) => ({
      method: 'PATCH',
      path: `/v1/supplier/offers/${segment(id)}`,
      body: change,
    }),
  }),
  tool({
    name: 'list_fills',
    description:
      "Clears on the supplier's offers, newest first: createdAt, model, offerId, burnDiem, clearingPriceCents, earnedUsdc. For the next page pass the answer's nextCursor as before.",
    input: pageInput,
    route: 'GET /v1/supplier/fills',
    call: (args) => pageCall('/v1/supplier/fills', args),
  }),
  tool({
    name: 'request_payout',
    description:
      "Pays out USDC on chain from the operator's payout wallet to the supplier's wallet: at least the minimum, at most payableUsdc (supplier_me). Answers the payout (state sending, then pending once mined, confirmed after the confirmations, or failed: the amount is payable again). The same idempotencyKey again answers the same payout, never a second transfer: retry with the same key, use a new key for a new payout.",
    input: t.Object(
      {
        amountUsdc: t.String({
          minLength: 1,
          maxLength: 32,
          description: 'USDC to pay out as a decimal string with at most 6 decimals ("5.000000")',
        }),
        idempotencyKey: t.String({
          pattern: IDEMPOTENCY_KEY.source,
          description: 'a key unique to this payout (1 to 255 visible characters), such as a UUID',
        }),
      },
      { additionalProperties: false },
    ),
    route: 'POST /v1/supplier/payouts',
    call: ({ amountUsdc, idempotencyKey }) => ({
      method: 'POST',
      path: '/v1/supplier/payouts',
      body: { amountUsdc },
      headers: { 'idempotency-key': idempotencyKey },
    }),
  }),
  tool({
    name: 'list_payouts',
    description:
      "The supplier's payouts, newest first: id, amountUsdc, wallet, state (sending, pending, confirmed, failed), txHash, blockNumber, error. For the next page pass the answer's nextCursor as before.",
    input: pageInput,
    route: 'GET /v1/supplier/payouts',
    call: (args) => pageCall('/v1/supplier/payouts', args),
  }),
  tool({
    name: 'list_webhooks',
    description:
      "The supplier's webhook endpoints (url, events; never a secret). Register one with POST /v1/supplier/webhooks: the secret is shown there once.",
    input: noInput,
    route: 'GET /v1/supplier/webhooks',
    call: () => ({ method: 'GET', path: '/v1/supplier/webhooks' }),
  }),
  tool({
    name: 'list_webhook_events',
    description:
      "The supplier's recent webhook events (payout.confirmed, payout.failed, supplier.suspended, supplier.reinstated), newest first: id, type, at, data, and each endpoint's delivery state (delivered, failing, skipped with its reason, unknown) with its last try. For the next page pass the answer's nextCursor as before.",
    input: pageInput,
    route: 'GET /v1/supplier/events',
    call: (args) => pageCall('/v1/supplier/events', args),
  }),
]
