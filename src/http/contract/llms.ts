// GET /llms.txt: the short guide an agent reads first. Figures come from the code's own constants.
import { MAX_MAX_PRICE_CENTS, MIN_MAX_PRICE_CENTS } from '../../accounts/accounts.ts'
import { MAX_ACTIVE_API_KEYS } from '../../accounts/api-keys.ts'

/** Sign-up and funding by x402: the routes a gateway with the funding network serves. */
function paidSignup(baseUrl: string): string {
  return `## 1. Sign up by payment
POST ${baseUrl}/v1/x402/signup {"amountUsdc": "5.000000", "name": "my-agent"} without a key.
The answer is 402 with "accepts": sign one of them (x402, exact scheme, USDC, EIP-3009) and send
the same request again with the X-PAYMENT header. The 201 holds apiKey (shown once: store it),
accountId and wallet. Credit is pending until the transfer is confirmed; only confirmed USDC is
spendable (GET ${baseUrl}/v1/agent/me shows both).

## 2. Fund
POST ${baseUrl}/v1/x402/refill {"amountUsdc": "20.000000"} with Authorization: Bearer <API_KEY>,
1 to 1000 USDC per payment, paid the same way. The paying wallet must be the account's (else 403 payer_mismatch).

`
}

/** Without the funding network the x402 routes are absent: the operator opens and credits accounts. */
function operatorSignup(baseUrl: string): string {
  return `## 1. Get a key
Funding by payment (x402) is off on this gateway: its operator opens your account and gives you its
first svc_ key (POST /admin/v1/accounts {"wallet"}). GET ${baseUrl}/v1/agent/me shows the balance.

## 2. Fund
The operator credits your account (POST /admin/v1/accounts/<accountId>/credit); only confirmed USDC
is spendable. A 402 on a paid call means the balance cannot hold the request: ask for a credit.

`
}

/** The balance refusals, as a gateway with x402 funding answers them, and as one without. */
const PAID_402 = `- 402 without "accepts": confirmed balance too low; refill, wait for confirmation, retry. Nothing moved.
- 402 with "accepts": a payment challenge; sign and retry. Nothing moved.
`
const CREDITED_402 = `- 402: confirmed balance too low; ask the operator for a credit, then retry. Nothing moved.
`
const PAID_409 = `- 409 on funding: money moved but the request did not finish; never pay again. "credited": true
  means the payment is in your balance (signup at the ${MAX_ACTIVE_API_KEYS}-key cap: no key was minted);
  "reconciling": true means the credit is queued from the chain; otherwise keep "transaction" and
  quote it to support.
`

/** The guide; `funded` when the x402 routes (signup, refill, top-up) are served. */
export function llmsGuide(baseUrl: string, funded: boolean): string {
  return `# svc gateway

> Prepaid, OpenAI-compatible inference. Fund a USDC balance, call chat with an svc_ key, and each
> request clears at the cheapest supplier offer at or below your max price.

Base address: ${baseUrl}
OpenAI-compatible base address: ${baseUrl}/v1 (model ids: svc/<id> or the bare id)
MCP server: ${baseUrl}/mcp (streamable HTTP; Authorization: Bearer <API_KEY>; tool agent_me confirms the connection)
Machine-readable contract: ${baseUrl}/openapi.json
Pages for people: ${baseUrl}/dashboard (buyers: paste a key), ${baseUrl}/supplier (wallet sign-in), ${baseUrl}/admin (operators)
Every error: {"error": {"message", "type", "code"}}; branch on error.code.

${funded ? paidSignup(baseUrl) : operatorSignup(baseUrl)}## 3. Pick a max price
Offers ask ${MIN_MAX_PRICE_CENTS} to ${MAX_MAX_PRICE_CENTS} cents per dollar of capacity. GET ${baseUrl}/v1/capacity?maxPriceCents=N shows
what a buyer at N can reach (cheapestPostedCents, depth). Set yours with
PATCH ${baseUrl}/v1/agent/max-price {"maxPriceCents": N}.

## 4. Call chat
POST ${baseUrl}/v1/chat/completions {"model": "svc/<live text id>", "messages": [...]} with the
Bearer key (GET ${baseUrl}/v1/models lists ids; only status "live", modality "text" are callable).
POST ${baseUrl}/v1/responses {"model", "input"} is the stateless Responses form: function tools,
function_call / function_call_output items, text.format and reasoning.effort work as on OpenAI;
what cannot be honoured is a 400 naming the field; nothing is stored (send whole input each turn).
Tools and structured output on chat pass through to the supplier.
POST ${baseUrl}/v1/messages {"model", "max_tokens", "messages"} is Anthropic's Messages API on the
same key (x-api-key or Bearer), balance and market: point an Anthropic client's base URL at
${baseUrl}. Text, image, tool_use and tool_result blocks, tools, tool_choice, stop_sequences and
thinking work as on Anthropic; errors come in Anthropic's shape with the same code; the streamed
cost rides on message_delta. POST ${baseUrl}/v1/messages/count_tokens counts a prompt for free.
GET ${baseUrl}/v1/models with an anthropic-version header is Anthropic's Models API (models.list
pages, models.retrieve): the models /v1/messages serves.

## 5. Read the cost
Buffered: headers X-Svc-Cost-Usdc, X-Svc-Clearing-Price-Cents, X-Svc-Support-Reference,
X-Balance-Remaining. Streamed: after the usage chunk, a frame {"object": "svc.cost", "costUsdc",
"clearingPriceCents", "supportReference"}, then [DONE]. Later: GET
${baseUrl}/v1/agent/requests/<supportReference>. Price paid = metered burn x clearing price.

## 6. Give an agent its own key with a spending limit
POST ${baseUrl}/v1/agent/keys {"name": "agent-1", "limitUsdc": "5.000000"}; change it with
PATCH ${baseUrl}/v1/agent/keys/<id> {"limitUsdc": "10.000000"} (null: no limit). Add
"limitReset": "daily" (or "weekly", "monthly") for a budget per period, from 00:00 UTC (weeks from
Monday, months from the 1st): {"limitUsdc": "5.000000", "limitReset": "daily"} is at most $5 a
day. GET ${baseUrl}/v1/agent/keys shows each key's limitUsdc, limitReset, spentUsdc,
periodSpentUsdc, limitResetsAt and limitRemainingUsdc.

## 7. See what was spent
GET ${baseUrl}/v1/agent/activity?limit=50 lists every request's attempts, newest first (supportReference,
model, keyId, status, costUsdc, clearingPriceCents, tokens, createdAt); send before=<nextCursor> for
the next page. GET ${baseUrl}/v1/agent/usage?window=24h|7d|30d gives costUsdc and requests per UTC
day, by model.

## 8. Sell capacity instead (suppliers)
GET ${baseUrl}/v1/supplier/nonce, then POST ${baseUrl}/v1/supplier/signin {"message", "signature"}
with an EIP-4361 (Sign-In with Ethereum) message for this gateway's host, signed by your wallet:
the answer's apiKey (sup_..., shown once) opens /v1/supplier/* and the supplier tools of the MCP
server, never buyer routes. POST ${baseUrl}/v1/supplier/offers {"upstreamApiKey", "askCents",
"capacityDiem": "100.000000"} sells an upstream key's capacity at that ask; GET
${baseUrl}/v1/supplier/me shows earned, paid out, pending and payable USDC; GET
${baseUrl}/v1/supplier/fills lists what cleared, GET ${baseUrl}/v1/supplier/earnings?window=7d
sums it per UTC day. POST ${baseUrl}/v1/supplier/payouts
{"amountUsdc": "5.000000"} with an Idempotency-Key header (retry with the same key: the same payout,
never a second transfer) sends payable USDC to your wallet on chain; GET
${baseUrl}/v1/supplier/payouts follows it (sending, pending, confirmed; failed: payable again).

## Errors and what to do
- 400: fix the request (bad JSON, non-live model, maxPriceCents outside ${MIN_MAX_PRICE_CENTS}..${MAX_MAX_PRICE_CENTS}).
- 401: missing or bad Bearer key (cookies are refused).
${funded ? PAID_402 : CREDITED_402}- 403 key_limit_exceeded: this key's spending limit would be passed by the request's worst case
  (requests in flight count); raise the limit (PATCH /v1/agent/keys/<id>) or lower max_tokens.
  Funding does not help. Nothing moved.
- 403 key_limit_binding: this key has a limit, so it may not raise or remove a limit, change a
  limitReset, change or revoke a key without one, nor mint a key without a limit within what it
  has left whose periods each hold whole periods of its own; nor change the account's max price
  or register, remove, disable, enable or rotate the secret of its webhook endpoints. Ask the
  account's owner. Nothing changed.
- 403 supplier_suspended (suppliers): the operator suspended you; no offer is posted or activated,
  no payout sent.
- 403 origin_not_allowed (/mcp): the request carried an Origin header other than the gateway's
  own, as a browser page on another site does. MCP clients that are not browsers send none.
${funded ? PAID_409 : ''}- 409 on POST /v1/agent/keys: ${MAX_ACTIVE_API_KEYS} keys already, revoke one (nothing paid).
- 429 key_concurrency_limit, buyer_concurrency_limit or count_concurrency_limit (count_tokens): wait
  Retry-After seconds (1) or lower your parallelism. 429 signup_fuse on signup: the global fuse; wait Retry-After.
  Suppliers: 429 nonce_rate_limited on the sign-in nonce, key_check_rate_limited on an offer post
  (its upstream key checks a minute); wait Retry-After. Nothing changed.
- 503 no_eligible_supply: supply exists above your max price; PATCH /v1/agent/max-price to the
  body's cheapestPostedCents and send the same request again.
- 503 pool_empty: nothing is posted at any price; wait.
- 503 insufficient_routable_at_price: offers at your price are too small for this request; a higher
  max price does not help, send a smaller job (lower max_tokens) or retry later.
- 503 key_wait_timeout: every eligible supplier key was busy; retry.
- 500 / 502: no charge unless the clear committed; safe to retry.
`
}
