// The hosted MCP server's tools. Each tool is one call of the public HTTP API, made with the
// caller's own key: the route validates, authenticates, bills and answers exactly as it does for
// any client, so a tool can never drift from the route it stands for. Input schemas are TypeBox
// (plain JSON Schema) built on the routes' own limits; the route still validates what it is sent.
import { type Static, type TSchema, t } from 'elysia'
import { MAX_MAX_PRICE_CENTS, MIN_MAX_PRICE_CENTS } from '../accounts/accounts.ts'
import { LIMIT_USDC_PATTERN } from '../accounts/api-keys.ts'
import { LIMIT_RESETS } from '../accounts/budget-periods.ts'
import { keyName } from '../accounts/key-name.ts'
import { chatMessageSchema } from '../inference/chat-request.ts'
import { contentText } from '../inference/content-parts.ts'

/** One request to the app, on the caller's behalf. */
export interface ApiCall {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  path: string
  body?: Record<string, unknown>
  /** Request headers a route reads besides the caller's key (an Idempotency-Key). */
  headers?: Record<string, string>
}

/** A tool's input is always a JSON object (MCP requires type: object). */
type ObjectSchema = TSchema & { type: 'object' }

export interface Tool<S extends ObjectSchema = ObjectSchema> {
  name: string
  description: string
  input: S
  /** The route the tool calls; a tool whose route the app does not serve is not offered. */
  route: string
  /** A rule the schema cannot say; the problem, or null. */
  refine?(args: Static<S>): string | null
  call(args: Static<S>): ApiCall
  /** Shapes a 2xx answer for the agent; without it the JSON body is the result. */
  present?(body: Record<string, unknown>, headers: Headers): ToolAnswer
}

export interface ToolAnswer {
  /** Text blocks, for agents that read only text. */
  content: string[]
  data: Record<string, unknown>
}

export const noInput = t.Object({}, { additionalProperties: false })
/** An argument a tool cannot send: its call answers invalid_arguments, as a schema's refusal does. */
export class InvalidArgument extends Error {}

/**
 * A path segment from an argument. `.` and `..` pass encoding unchanged (and so does `%2E`, which a
 * URL reads as a dot): they would name the route above, so they are no id.
 */
export function segment(value: string): string {
  if (/^(\.|%2e){1,2}$/i.test(value)) throw new InvalidArgument(`'${value}' is no id`)
  // A lone surrogate is no character: it has no UTF-8 form, and encodeURIComponent throws on it.
  if (!value.isWellFormed())
    throw new InvalidArgument('an id must be well-formed Unicode (no lone surrogate)')
  return encodeURIComponent(value)
}

// t.Number with multipleOf 1, as the routes: Elysia's t.Integer would also take numeric strings.
const maxPriceCents = t.Number({
  multipleOf: 1,
  minimum: MIN_MAX_PRICE_CENTS,
  maximum: MAX_MAX_PRICE_CENTS,
  description: `cents per dollar of capacity, ${MIN_MAX_PRICE_CENTS} to ${MAX_MAX_PRICE_CENTS}`,
})

const chatInput = t.Object(
  {
    model: t.String({
      minLength: 1,
      maxLength: 256,
      description: 'a live text model id from list_models, bare or with the svc/ prefix',
    }),
    prompt: t.Optional(t.String({ minLength: 1, description: 'a single user message (or send messages)' })),
    messages: t.Optional(
      t.Array(chatMessageSchema, {
        minItems: 1,
        maxItems: 4096,
        description: 'an OpenAI chat message array (or send prompt)',
      }),
    ),
    max_tokens: t.Optional(
      t.Number({ multipleOf: 1, minimum: 1, description: 'the most tokens to generate' }),
    ),
  },
  { additionalProperties: false },
)

const limitUsdc = t.String({
  pattern: LIMIT_USDC_PATTERN,
  description:
    'the most this key may spend, in USDC as a decimal string ("5.000000"): ever, or in each period of its limitReset',
})
const limitReset = t.Union(
  LIMIT_RESETS.map((kind) => t.Literal(kind)),
  {
    description:
      "how often the limit resets: daily, weekly (Mondays) or monthly (the 1st), at 00:00 UTC; without it the limit is for the key's lifetime",
  },
)
const keyId = t.String({ minLength: 1, maxLength: 64, description: 'the key id (UUID) from list_keys' })

/** What list_key_budgets answers of each key: its limit and where its period stands. */
const BUDGET_FIELDS = [
  'id',
  'name',
  'limitUsdc',
  'limitReset',
  'spentUsdc',
  'periodSpentUsdc',
  'limitResetsAt',
  'limitRemainingUsdc',
] as const

/** A Stream-backed list's page: limit and the previous page's nextCursor. */
export const pageInput = t.Object(
  {
    limit: t.Optional(t.Number({ multipleOf: 1, minimum: 1, maximum: 200, description: 'items, 1 to 200' })),
    before: t.Optional(
      t.String({ minLength: 1, maxLength: 40, description: 'the nextCursor of the previous page' }),
    ),
  },
  { additionalProperties: false },
)

export function pageCall(path: string, args: Static<typeof pageInput>): ApiCall {
  const params = new URLSearchParams()
  if (args.limit !== undefined) params.set('limit', String(args.limit))
  if (args.before !== undefined) params.set('before', args.before)
  const search = params.toString()
  return { method: 'GET', path: `${path}${search ? `?${search}` : ''}` }
}

export function tool<S extends ObjectSchema>(definition: Tool<S>): Tool {
  return definition as unknown as Tool
}

export const TOOLS: Tool[] = [
  tool({
    name: 'agent_me',
    description:
      'The account behind this key: account id, wallet, confirmed, pending and held USDC, max price, key count. Use it to confirm the connection.',
    input: noInput,
    route: 'GET /v1/agent/me',
    call: () => ({ method: 'GET', path: '/v1/agent/me' }),
  }),
  tool({
    name: 'list_models',
    description:
      'The model catalog: id, status (live or coming_soon), modality, pricing. Only live text models are callable through chat.',
    input: noInput,
    route: 'GET /v1/models',
    call: () => ({ method: 'GET', path: '/v1/models' }),
  }),
  tool({
    name: 'capacity',
    description:
      'Routable capacity by posted price, cheapest first, and the cost of buying all of it. With maxPriceCents, only what a buyer at that max price can reach. A pre-flight check, not a reservation.',
    input: t.Object({ maxPriceCents: t.Optional(maxPriceCents) }, { additionalProperties: false }),
    route: 'GET /v1/capacity',
    call: (args) => ({
      method: 'GET',
      path:
        args.maxPriceCents === undefined
          ? '/v1/capacity'
          : `/v1/capacity?maxPriceCents=${args.maxPriceCents}`,
    }),
  }),
  tool({
    name: 'list_keys',
    description: "The account's active API keys (metadata only, never a plaintext) and the cap of 10.",
    input: noInput,
    route: 'GET /v1/agent/keys',
    call: () => ({ method: 'GET', path: '/v1/agent/keys' }),
  }),
  tool({
    name: 'mint_key',
    description:
      'Mints a new API key, optionally with a spending limit (give an agent a key that cannot spend more than limitUsdc), for its lifetime or, with limitReset, per day, week or month ("at most $5 a day"). The plaintext apiKey appears in this answer only: store it before using it. Fails at 10 active keys. A limited key must give a limitUsdc within what it has left, with periods that each hold whole periods of its own (a weekly key mints weekly or lifetime limits), which leaves its own limit (403 key_limit_binding).',
    input: t.Object(
      {
        name: t.String({ ...keyName, description: `a label for the key, ${keyName.description}` }),
        limitUsdc: t.Optional(limitUsdc),
        limitReset: t.Optional(limitReset),
      },
      { additionalProperties: false },
    ),
    route: 'POST /v1/agent/keys',
    call: (args) => ({
      method: 'POST',
      path: '/v1/agent/keys',
      body: {
        name: args.name,
        ...(args.limitUsdc === undefined ? {} : { limitUsdc: args.limitUsdc }),
        ...(args.limitReset === undefined ? {} : { limitReset: args.limitReset }),
      },
    }),
  }),
  tool({
    name: 'set_key_limit',
    description:
      "Sets one of the account's keys' spending limit (limitUsdc; null removes it, and its reset), by its id from list_keys, keeping how often it resets (set_key_budget changes that). A request that would take the key past it gets 403 key_limit_exceeded. A limited key may only lower the limits of limited keys (403 key_limit_binding). Answers the key with limitUsdc, spentUsdc and limitRemainingUsdc.",
    input: t.Object(
      {
        id: keyId,
        limitUsdc: t.Union([limitUsdc, t.Null()]),
      },
      { additionalProperties: false },
    ),
    route: 'PATCH /v1/agent/keys/:id',
    call: (args) => ({
      method: 'PATCH',
      path: `/v1/agent/keys/${segment(args.id)}`,
      body: { limitUsdc: args.limitUsdc },
    }),
  }),
  tool({
    name: 'list_key_budgets',
    description:
      "Each active key's budget: limitUsdc, limitReset (daily, weekly, monthly, or null for a lifetime limit), spentUsdc (ever), periodSpentUsdc (in the current period), limitResetsAt (when the period ends, UTC) and limitRemainingUsdc (what new requests may still hold).",
    input: noInput,
    route: 'GET /v1/agent/keys',
    call: () => ({ method: 'GET', path: '/v1/agent/keys' }),
    present: (body) => {
      const keys = (body.activeApiKeys ?? []) as Record<string, unknown>[]
      const budgets = keys.map((key) =>
        Object.fromEntries(BUDGET_FIELDS.map((field) => [field, key[field] ?? null])),
      )
      return { content: [JSON.stringify(budgets)], data: { budgets } }
    },
  }),
  tool({
    name: 'set_key_budget',
    description:
      "Sets one of the account's keys' budget, by its id from list_keys: at most limitUsdc per limitReset period (daily, weekly from Monday, monthly from the 1st, at 00:00 UTC), or for its lifetime with limitReset null. A limit below what the key spent in the period and holds is a 409. A limited key may only lower limits and never change a reset (403 key_limit_binding). Answers the key with its budget.",
    input: t.Object(
      { id: keyId, limitUsdc, limitReset: t.Union([limitReset, t.Null()]) },
      { additionalProperties: false },
    ),
    route: 'PATCH /v1/agent/keys/:id',
    call: (args) => ({
      method: 'PATCH',
      path: `/v1/agent/keys/${segment(args.id)}`,
      body: { limitUsdc: args.limitUsdc, limitReset: args.limitReset },
    }),
  }),
  tool({
    name: 'revoke_key',
    description:
      "Revokes one of the account's keys by its id from list_keys. It may be the key this connection uses, after which every call fails with 401. Rotate by mint, store, verify, then revoke. A limited key may not revoke a key without a limit (403 key_limit_binding).",
    input: t.Object({ id: keyId }, { additionalProperties: false }),
    route: 'DELETE /v1/agent/keys/:id',
    call: (args) => ({ method: 'DELETE', path: `/v1/agent/keys/${segment(args.id)}` }),
  }),
  tool({
    name: 'set_max_price',
    description:
      "Sets the account's max price: requests only clear at offers asking this much or less. After a 503 no_eligible_supply, set it to that error's cheapestPostedCents. A key with a spending limit may not (403 key_limit_binding).",
    input: t.Object({ maxPriceCents }, { additionalProperties: false }),
    route: 'PATCH /v1/agent/max-price',
    call: (args) => ({
      method: 'PATCH',
      path: '/v1/agent/max-price',
      body: { maxPriceCents: args.maxPriceCents },
    }),
  }),
  tool({
    name: 'get_request',
    description: 'Looks up an earlier request by its support reference (sr_...): its cost and attempt.',
    input: t.Object(
      {
        supportReference: t.String({
          minLength: 1,
          maxLength: 64,
          description: 'the X-Svc-Support-Reference of the request',
        }),
      },
      { additionalProperties: false },
    ),
    route: 'GET /v1/agent/requests/:supportReference',
    call: (args) => ({ method: 'GET', path: `/v1/agent/requests/${segment(args.supportReference)}` }),
  }),
  tool({
    name: 'list_activity',
    description:
      "The account's requests, newest first, one item per attempt: supportReference, model, keyId, status, costUsdc, clearingPriceCents, tokens, createdAt. For the next page pass the answer's nextCursor as before.",
    input: pageInput,
    route: 'GET /v1/agent/activity',
    call: (args) => pageCall('/v1/agent/activity', args),
  }),
  tool({
    name: 'list_webhooks',
    description:
      "The account's webhook endpoints (url, events, balanceThresholdUsdc; never a secret). Register one with POST /v1/agent/webhooks: the secret is shown there once.",
    input: noInput,
    route: 'GET /v1/agent/webhooks',
    call: () => ({ method: 'GET', path: '/v1/agent/webhooks' }),
  }),
  tool({
    name: 'list_webhook_events',
    description:
      "The account's recent webhook events, newest first: id, type, at, data, and each endpoint's delivery state (delivered, failing, skipped with its reason, unknown) with its last try. For the next page pass the answer's nextCursor as before.",
    input: pageInput,
    route: 'GET /v1/agent/events',
    call: (args) => pageCall('/v1/agent/events', args),
  }),
  tool({
    name: 'get_usage',
    description:
      'What the account spent and how many requests it was served, per UTC day and by model, over 24h, 7d or 30d.',
    input: t.Object(
      { window: t.Optional(t.Union([t.Literal('24h'), t.Literal('7d'), t.Literal('30d')])) },
      { additionalProperties: false },
    ),
    route: 'GET /v1/agent/usage',
    call: (args) => ({ method: 'GET', path: `/v1/agent/usage?window=${args.window ?? '7d'}` }),
  }),
  tool({
    name: 'chat',
    description:
      'Runs one buffered chat completion on a live text model, paid from the confirmed balance at the cheapest eligible offer, and returns the text with its cost (costUsdc, clearingPriceCents, supportReference). Send prompt or messages, not both.',
    input: chatInput,
    route: 'POST /v1/chat/completions',
    refine: (args) =>
      (args.prompt === undefined) === (args.messages === undefined)
        ? 'send exactly one of prompt and messages'
        : null,
    call: (args) => ({
      method: 'POST',
      path: '/v1/chat/completions',
      body: {
        model: args.model,
        messages: args.messages ?? [{ role: 'user', content: args.prompt }],
        ...(args.max_tokens === undefined ? {} : { max_tokens: args.max_tokens }),
        stream: false,
      },
    }),
    present: chatAnswer,
  }),
]

interface ChatCompletion {
  model?: string
  choices?: { message?: { content?: unknown } }[]
  usage?: unknown
}

/** The completion's text with what it cost, read from the cost headers of the buffered answer. */
function chatAnswer(body: Record<string, unknown>, headers: Headers): ToolAnswer {
  const completion = body as ChatCompletion
  const content = completion.choices?.[0]?.message?.content
  // Content given as parts (Mistral's) is the text of its text parts.
  const { text } = contentText(content)
  const costUsdc = headers.get('x-svc-cost-usdc')
  const clearingPriceCents = Number(headers.get('x-svc-clearing-price-cents'))
  const supportReference = headers.get('x-svc-support-reference')
  return {
    content: [
      text,
      `cost ${costUsdc} USDC at ${clearingPriceCents} cents per dollar; support reference ${supportReference}`,
    ],
    data: {
      text,
      model: completion.model,
      usage: completion.usage,
      costUsdc,
      clearingPriceCents,
      supportReference,
      balanceRemainingUsdc: headers.get('x-balance-remaining'),
      requestId: headers.get('x-svc-request-id'),
    },
  }
}
