// What the OpenAPI document says of each route beyond its schemas: summary, tags, security and
// responses. Request bodies and path parameters come from the routes' own TypeBox schemas (see
// openapi.ts); only what a route reads by hand (query strings) is declared here. A route missing
// from this table fails test/contract/openapi.test.ts.
import { ADMIN_OPERATIONS } from './admin-operations.ts'
import { type ErrorResponseName, errors, headers } from './components.ts'
import { MESSAGES_OPERATIONS } from './messages-operations.ts'
import { MODELS_OPERATIONS } from './models-operations.ts'
import {
  type Operation,
  ok,
  PAGE_PARAMETERS,
  query,
  type Security,
  WINDOW_PARAMETERS,
} from './operation-parts.ts'
import { PAGE_OPERATIONS } from './page-operations.ts'
import { SUPPLIER_OPERATIONS } from './supplier-operations.ts'
import { WEBHOOK_OPERATIONS } from './webhook-operations.ts'

export type { Operation }

const inferenceOk = (description: string) =>
  ok(description, '200', {
    headers: headers('SupportReference', 'CostUsdc', 'ClearingPriceCents', 'BalanceRemaining'),
    content: {
      'application/json': { schema: { type: 'object', description: 'buffered (stream omitted or false)' } },
      'text/event-stream': { schema: { type: 'string', description: 'SSE (stream: true): no cost headers' } },
    },
  })

const INFERENCE_ERRORS: ErrorResponseName[] = [
  'BadRequest',
  'Unauthorized',
  'InsufficientBalance',
  'Forbidden',
  'NotFound',
  'TooManyRequests',
  'ServerError',
  'BadGateway',
  'ServiceUnavailable',
]

/** A method /mcp does not take (405, Allow: POST): JSON-RPC goes in POSTs only. */
const MCP_ONLY_POST: Operation = {
  summary: 'Not allowed: send JSON-RPC with POST',
  tags: ['mcp'],
  security: 'apiKey|supplierKey',
  ok: {},
  errors: ['Unauthorized', 'Forbidden', 'MethodNotAllowed'],
}

export const OPERATIONS: Record<string, Operation> = {
  'GET /healthz': { summary: 'Liveness', tags: ['operations'], security: 'none', errors: [] },
  'GET /metrics': {
    summary:
      'Prometheus metrics: requests by route and status, latency, clears, fall-forwards, holds, streams, Redis latency',
    tags: ['operations'],
    security: 'adminToken',
    errors: ['Unauthorized'],
  },
  'GET /readyz': {
    summary: 'Readiness: Redis reachable and not draining (503 when not)',
    tags: ['operations'],
    security: 'none',
    errors: [],
    ok: { ...ok('Ready'), '503': { description: 'Redis unreachable' } },
  },
  'GET /openapi.json': { summary: 'This document', tags: ['contract'], security: 'none', errors: [] },
  'GET /llms.txt': {
    summary: 'A plain-text guide for agents',
    tags: ['contract'],
    security: 'none',
    errors: [],
    ok: ok('The guide', '200', { content: { 'text/plain': { schema: { type: 'string' } } } }),
  },

  'GET /v1/models/stats': {
    summary: 'Relative model usage (never raw counts)',
    tags: ['public'],
    security: 'none',
    parameters: WINDOW_PARAMETERS,
    errors: ['BadRequest'],
  },
  'GET /v1/capacity': {
    summary: 'Routable capacity by posted price, cheapest first (cached 30 s)',
    tags: ['public'],
    security: 'none',
    parameters: [
      query('maxPriceCents', "narrows to a buyer's view at this max price; outside 30..80 is a 400", {
        type: 'integer',
        minimum: 30,
        maximum: 80,
      }),
    ],
    errors: ['BadRequest'],
  },

  'POST /v1/chat/completions': {
    summary: 'Chat completion, buffered or SSE, paid at the cheapest eligible offer',
    description:
      "What OpenAI refuses is a 400 naming the field, before anything is held: temperature, top_p, presence_penalty, frequency_penalty or a logit_bias value outside OpenAI's ranges, more than 4 stop sequences, two tools of one name, a tool_choice that names no sent function or is required with no tools, a tool message answering no earlier tool call, an assistant's tool_calls not each answered before the next user or assistant turn. Streamed: content chunks, the final usage chunk after the clear, then a svc.cost frame {object, choices: [], costUsdc, clearingPriceCents, supportReference}, then [DONE]. A post-start failure is an SSE data error object instead of [DONE].",
    tags: ['inference'],
    security: 'apiKey',
    ok: inferenceOk('The completion'),
    errors: INFERENCE_ERRORS,
  },
  'POST /v1/responses': {
    summary: 'Stateless Responses API over the same market',
    description:
      "Input: a string, or message (text and input_image parts), function_call and function_call_output items; function tools, tool_choice, text.format (json_schema, json_object), reasoning.effort, max_output_tokens, parallel_tool_calls, user, metadata. Output items: reasoning, message, function_call. A field that cannot be honoured (hosted tools, item_reference to a message or call, conversation, background, a function_call_output whose function_call is not in the input, a function_call without its function_call_output, a tool_choice that names no sent tool or is required with none, temperature or top_p outside OpenAI's ranges ...) is a 400 naming it; store and previous_response_id are accepted, nothing is stored: send the whole conversation each turn. An answer cut at max_output_tokens is status incomplete, incomplete_details.reason max_output_tokens. Streamed events are OpenAI's response.* sequence (function calls: output_item.added, function_call_arguments.delta/.done, output_item.done); response.completed and response.incomplete carry costUsdc, clearingPriceCents and supportReference (response.incomplete without usage); response.failed when the clear fails.",
    tags: ['inference'],
    security: 'apiKey',
    ok: inferenceOk('The response'),
    errors: INFERENCE_ERRORS,
  },
  'POST /v1/images/generations': {
    summary: 'Image generation, paid per image delivered at the cheapest eligible offer',
    description:
      "OpenAI's request and answer, b64_json only: response_format url and stream true are a 400 that says so. Burn = the catalog's per-image price x images delivered; a model priced by tier (its row's pricing.resolutions, pricing.quality) is billed at the tier the request names with resolution (and quality, or the row's default_quality), sent to the upstream's native image endpoint with aspect_ratio and output_format (png, jpeg or webp): one image per request (n above 1 is a 400 naming n); one that names no tier or one not listed, or sends size, width or height, is a 400 naming the parameter. One image job in flight per wallet (429 buyer_concurrency_limit).",
    tags: ['inference'],
    security: 'apiKey',
    ok: ok('The images', '200', {
      headers: headers('SupportReference', 'CostUsdc', 'ClearingPriceCents', 'BalanceRemaining'),
    }),
    errors: INFERENCE_ERRORS,
  },
  'POST /v1/video/quote': {
    summary: 'No-wait video quote: the price of a job at the ask it would clear at now',
    description:
      'Nothing is held. 503 keys_busy when every eligible supplier key is in flight. Carries the request id only.',
    tags: ['inference'],
    security: 'apiKey',
    ok: ok('The quote: quoteUsdc and clearingPriceCents'),
    errors: INFERENCE_ERRORS,
  },
  'POST /v1/video/queue': {
    summary:
      "Queue a video job: the catalog's quoted price at the ask is held until it is retrieved; the burn is the supplier key's own quote",
    tags: ['inference'],
    security: 'apiKey',
    ok: ok('The queued job (id, status, heldUsdc, clearingPriceCents)', '200', {
      headers: headers('SupportReference'),
    }),
    errors: INFERENCE_ERRORS,
  },
  'POST /v1/video/retrieve': {
    summary: 'Poll a video job: its status while it runs, then the MP4 (cleared on the first success)',
    description:
      'A job the supplier failed is refunded in full; it and an expired job answer 410. Polls carry the request id only.',
    tags: ['inference'],
    security: 'apiKey',
    ok: ok('JSON status, or video/mp4 with the cost headers on the first success', '200', {
      headers: headers('CostUsdc', 'ClearingPriceCents', 'BalanceRemaining'),
    }),
    errors: [...INFERENCE_ERRORS, 'Gone'],
  },
  'GET /v1/responses': {
    summary: 'Not stored: always 404',
    tags: ['inference'],
    security: 'none',
    ok: {},
    errors: ['NotFound'],
  },
  'GET /v1/responses/{id}': {
    summary: 'Not stored: always 404',
    tags: ['inference'],
    security: 'none',
    ok: {},
    errors: ['NotFound'],
  },

  'GET /v1/agent/me': {
    summary: 'The account: wallet, confirmed, pending and held USDC, max price, key count',
    tags: ['agent'],
    security: 'apiKey',
    errors: ['Unauthorized'],
  },
  'GET /v1/agent/keys': {
    summary:
      'Active API keys (metadata only), each with its limit and limitReset, what it spent (ever and in the current period), when the period resets, and what it has left',
    tags: ['agent'],
    security: 'apiKey',
    ok: ok('The active keys, their count and the cap', '200', {
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              activeApiKeys: { type: 'array', items: { $ref: '#/components/schemas/ApiKey' } },
              activeApiKeyCount: { type: 'number' },
              maxActiveApiKeys: { type: 'number' },
            },
          },
        },
      },
    }),
    errors: ['Unauthorized'],
  },
  'POST /v1/agent/keys': {
    summary:
      'Mint an API key (plaintext shown once), with an optional spending limit, for its lifetime or reset daily, weekly or monthly; 409 at 10 active keys',
    tags: ['agent'],
    security: 'apiKey',
    description:
      "limitReset (daily, weekly, monthly: at 00:00 UTC, weeks from Monday, months from the 1st) makes limitUsdc a budget per period; it needs a limitUsdc (400 otherwise). A caller whose own key has a limit must give limitUsdc within what it has left, with periods that each hold whole periods of its own (a daily key: daily, weekly, monthly or none; weekly: weekly or none; monthly: monthly or none; lifetime: none); that much leaves the caller's own limit (403 key_limit_binding otherwise).",
    ok: ok(
      'The new key: apiKey, id, name, keyPrefix, limitUsdc, limitReset, spentUsdc, periodSpentUsdc, limitResetsAt, limitRemainingUsdc',
      '201',
    ),
    errors: ['BadRequest', 'Unauthorized', 'Forbidden', 'Conflict'],
  },
  'PATCH /v1/agent/keys/{id}': {
    summary:
      "Set one of the account's keys' spending limit (null: none), its limitReset (null: lifetime) and/or name",
    description:
      'limitUsdc is a decimal string; a request whose worst case would take the key past it (spent, in the current period for a periodic limit, + held in flight + this hold) gets 403 key_limit_exceeded, with limitResetsAt for a periodic limit. limitReset daily, weekly or monthly resets it at 00:00 UTC (weeks from Monday, months from the 1st); a changed reset counts what the key spent in its current period in the new one. A limitReset on a key left without a limit is a 400; removing the limit removes its reset. A limit below what the key spent (in the period) and holds is a 409. A caller whose own key has a limit may only lower the limits of limited keys and never change a limitReset (403 key_limit_binding otherwise).',
    tags: ['agent'],
    security: 'apiKey',
    ok: ok('The key as listed, with its limit and spending', '200', {
      content: { 'application/json': { schema: { $ref: '#/components/schemas/ApiKey' } } },
    }),
    errors: ['BadRequest', 'Unauthorized', 'Forbidden', 'NotFound', 'Conflict'],
  },
  'DELETE /v1/agent/keys/{id}': {
    summary: "Revoke one of the account's keys (may be the calling key)",
    description:
      'A caller whose own key has a limit may not revoke a key without one (403 key_limit_binding).',
    tags: ['agent'],
    security: 'apiKey',
    errors: ['Unauthorized', 'Forbidden', 'NotFound'],
  },
  'PATCH /v1/agent/max-price': {
    summary: 'Set the max price, 30..80 cents per dollar',
    description:
      'A key with a spending limit may not change it (403 key_limit_binding): it prices every key.',
    tags: ['agent'],
    security: 'apiKey',
    errors: ['BadRequest', 'Unauthorized', 'Forbidden'],
  },
  'GET /v1/agent/activity': {
    summary: "The account's ended attempts, newest first: object list, data[], nextCursor",
    description:
      'Each item: supportReference, model, keyId, status (completed, incomplete, failed, expired, refused), costUsdc, clearingPriceCents, inputTokens, outputTokens, createdAt (when it ended). Pass nextCursor as before for the next page: no gaps or repeats while new requests are written. Kept for the record retention.',
    tags: ['agent'],
    security: 'apiKey',
    parameters: PAGE_PARAMETERS,
    errors: ['BadRequest', 'Unauthorized'],
  },
  'GET /v1/agent/usage': {
    summary: 'What the account was charged and how many requests it was served, per UTC day, by model',
    description:
      'days[]: date, costUsdc, requests, models[] (model, costUsdc, requests); totals beside. A window is that many UTC days, today so far included.',
    tags: ['agent'],
    security: 'apiKey',
    parameters: WINDOW_PARAMETERS,
    errors: ['BadRequest', 'Unauthorized'],
  },
  'GET /v1/agent/requests/{supportReference}': {
    summary: "A request's cost and attempt, by its support reference",
    tags: ['agent'],
    security: 'apiKey',
    errors: ['Unauthorized', 'NotFound'],
  },

  'POST /v1/x402/signup': {
    summary: 'Create an account and its first key by payment',
    tags: ['funding'],
    security: 'x402',
    ok: ok('The account and its key (plaintext shown once)', '201'),
    errors: ['BadRequest', 'PaymentChallenge', 'Conflict', 'TooManyRequests', 'BadGateway'],
  },
  'POST /v1/x402/refill': {
    summary: 'Add 1 to 1000 USDC to your own account by payment',
    tags: ['funding'],
    security: 'apiKey+x402',
    errors: ['BadRequest', 'Unauthorized', 'PaymentChallenge', 'Forbidden', 'Conflict', 'BadGateway'],
  },
  'POST /v1/x402/topup': {
    summary: "Browser top-up: credit the paying wallet's account (created if need be)",
    tags: ['funding'],
    security: 'x402',
    errors: ['BadRequest', 'PaymentChallenge', 'Conflict', 'TooManyRequests', 'BadGateway'],
  },
  'GET /v1/x402/payments/{transaction}': {
    summary: 'A top-up payment: pending, confirmed or reversed',
    description:
      '200 {transaction, amountUsdc, status: "pending" | "confirmed" | "reversed", confirmationsRequired}. A payment a reorg moved to another transaction (the one that did use its authorization) is answered by its old hash too, as it is now: 200 with the new `transaction` and `movedFrom` (the hash asked for), so a client polling the old hash follows the new one. A pending credit taken back (a reorg took its transaction out and its authorization expired unused: no money moved, nothing stays credited) is final: 200 with status "reversed" and reversedAt (ISO 8601), by its own hash and any it moved from. A transaction that used several authorizations (a batch) answers them all: `payments`, each {paymentId, transaction, amountUsdc, status}, `amountUsdc` their sum credited, `status` pending while any is, reversed once all are. 404 payment_not_found until credited.',
    tags: ['funding'],
    security: 'none',
    errors: ['NotFound'],
  },
  'GET /topup': {
    summary: 'The browser top-up page',
    tags: ['funding'],
    security: 'none',
    ok: ok('HTML', '200', { content: { 'text/html': { schema: { type: 'string' } } } }),
    errors: [],
  },

  'POST /mcp': {
    summary: 'MCP server: streamable HTTP, stateless, JSON-RPC 2.0',
    description:
      "Send initialize, tools/list and tools/call as JSON-RPC POSTs with Accept: application/json, text/event-stream. Tools: agent_me, list_models, capacity, list_keys, list_key_budgets, mint_key, set_key_limit, set_key_budget, revoke_key, set_max_price, get_request, list_activity, list_webhooks, list_webhook_events, get_usage, chat. With a supplier key (sup_...) the supplier tools instead: supplier_me, list_offers, post_offer, update_offer, list_fills, request_payout, list_payouts, and its own list_webhooks and list_webhook_events. A tool error carries the HTTP status and error.code of the route it calls. A request with an Origin header other than the gateway's own (SVC_PUBLIC_URL) is refused 403 origin_not_allowed (a browser page on another site). A body that is not a JSON-RPC 2.0 message, a batch sent with MCP-Protocol-Version 2025-06-18 or later (versions without batches; without the header a client speaks 2025-03-26, which has them), and a batch that is empty or holds two requests with one id are each a 400 with JSON-RPC's Invalid Request (-32600), before anything runs; notifications/cancelled is ignored.",
    tags: ['mcp'],
    security: 'apiKey|supplierKey',
    ok: ok('A JSON-RPC answer', '200', { content: { 'application/json': { schema: { type: 'object' } } } }),
    errors: ['BadRequest', 'Unauthorized', 'Forbidden'],
  },
  'GET /mcp': {
    summary: 'Not allowed: no standalone stream (stateless)',
    tags: ['mcp'],
    security: 'apiKey|supplierKey',
    ok: {},
    errors: ['Unauthorized', 'Forbidden', 'MethodNotAllowed'],
  },
  'DELETE /mcp': {
    summary: 'Not allowed: no session to end (stateless)',
    tags: ['mcp'],
    security: 'apiKey|supplierKey',
    ok: {},
    errors: ['Unauthorized', 'Forbidden', 'MethodNotAllowed'],
  },
  'PUT /mcp': MCP_ONLY_POST,
  'PATCH /mcp': MCP_ONLY_POST,
  'OPTIONS /mcp': MCP_ONLY_POST,
  ...ADMIN_OPERATIONS,
  ...MESSAGES_OPERATIONS,
  ...MODELS_OPERATIONS,
  ...SUPPLIER_OPERATIONS,
  ...WEBHOOK_OPERATIONS,
  ...PAGE_OPERATIONS,
}

const SECURITY: Record<Security, Record<string, string[]>[]> = {
  none: [],
  apiKey: [{ apiKey: [] }],
  adminToken: [{ adminToken: [] }],
  x402: [{ x402: [] }],
  'apiKey+x402': [{ apiKey: [], x402: [] }],
  supplierKey: [{ supplierKey: [] }],
  'apiKey|supplierKey': [{ apiKey: [] }, { supplierKey: [] }],
  'apiKey|anthropicKey': [{ apiKey: [] }, { anthropicKey: [] }],
}

/** The OpenAPI fields this table gives one operation. */
export function operationFields(operation: Operation) {
  return {
    summary: operation.summary,
    ...(operation.description ? { description: operation.description } : {}),
    tags: operation.tags,
    security: SECURITY[operation.security],
    responses: { ...(operation.ok ?? ok('OK')), ...errors(...operation.errors) },
  }
}
