// A chat request, validated and admitted: the live text model it names, the max tokens it may
// generate, the worst-case burn the market holds for it, and the body the supplier receives.
import { t } from 'elysia'
import type { CatalogEntry, TextPrices } from '../catalog/entry.ts'
import { badRequest } from '../errors.ts'
import type { MicroDiem } from '../money/units.ts'
import { callableModel } from './callable-model.ts'
import { dearestPromptPrice, reachableTiers, worstBurn } from './meter.ts'
import { type ChatMessageLike, promptTokenBound } from './tokens.ts'
import { refuseUnbilledFeatures, withoutUpstreamPrompt } from './unbilled-features.ts'

const wholePositive = t.Number({ multipleOf: 1, minimum: 1 })

/** OpenAI's own limit on `n`; each choice is held at the full token limit. */
export const MAX_CHOICES = 128

/**
 * A request that names no token limit is sent with the most its balance affords, but never fewer
 * than this: below it the answer would be too short to be of use, and the buyer gets the 402.
 */
export const MIN_FITTED_TOKENS = 256

export const chatMessageSchema = t.Object(
  {
    role: t.Union(['system', 'developer', 'user', 'assistant', 'tool', 'function'].map((r) => t.Literal(r))),
    content: t.Optional(t.Union([t.String(), t.Array(t.Any()), t.Null()])),
  },
  { additionalProperties: true },
)

/** Every other OpenAI field passes through to the supplier untouched. */
export const chatBodySchema = t.Object(
  {
    model: t.String({ minLength: 1, maxLength: 256 }),
    messages: t.Array(chatMessageSchema, { minItems: 1, maxItems: 4096 }),
    stream: t.Optional(t.Boolean()),
    max_tokens: t.Optional(t.Union([wholePositive, t.Null()])),
    max_completion_tokens: t.Optional(t.Union([wholePositive, t.Null()])),
    stream_options: t.Optional(t.Union([t.Object({}, { additionalProperties: true }), t.Null()])),
    n: t.Optional(t.Union([t.Number({ multipleOf: 1, minimum: 1, maximum: MAX_CHOICES }), t.Null()])),
  },
  { additionalProperties: true },
)

export type ChatBody = typeof chatBodySchema.static

export interface TextModel {
  id: string
  prices: TextPrices
  contextTokens: number
  maxCompletionTokens: number
}

/** The catalog entry of a callable text model, or the contract's 404 / 400. */
export function liveTextModel(entry: CatalogEntry | undefined, requested: string): TextModel {
  const { row, prices } = callableModel(entry, requested, 'text', ['inputPerMillion', 'outputPerMillion'])
  return {
    id: row.id,
    prices,
    contextTokens: row.context_length ?? Number.MAX_SAFE_INTEGER,
    maxCompletionTokens: row.max_completion_tokens ?? Number.MAX_SAFE_INTEGER,
  }
}

export interface ValidChat {
  model: TextModel
  stream: boolean
  /** The token limit of each choice, as sent to the supplier. */
  maxTokens: number
  /** `n`: how many choices the supplier generates, each up to maxTokens. */
  choices: number
  promptTokenBound: number
  /**
   * The worst case the request allows: the prompt bound at its dearest prompt price and every
   * choice at the limit, at the extended tier when the bound can pass its threshold.
   */
  holdDiem: MicroDiem
  upstreamBody: Record<string, unknown>
  /** True when the client named no token limit, so the limit may be fitted to the balance. */
  fittable: boolean
}

function withLimit(chat: ValidChat, maxTokens: number, limitField: string): ValidChat {
  const upstreamBody = { ...chat.upstreamBody, [limitField]: maxTokens }
  const holdDiem = worstBurn(chat.promptTokenBound, maxTokens * chat.choices, chat.model.prices)
  return { ...chat, maxTokens, holdDiem, upstreamBody }
}

export function validateChat(body: ChatBody, model: TextModel, defaultMaxTokens: number): ValidChat {
  refuseUnbilledFeatures(body)
  const asked = body.max_completion_tokens ?? body.max_tokens ?? null
  if (asked !== null && asked > model.maxCompletionTokens) {
    throw badRequest(
      `max_tokens ${asked} exceeds ${model.id}'s limit of ${model.maxCompletionTokens}`,
      'max_tokens_too_large',
    )
  }
  const maxTokens = asked ?? Math.min(defaultMaxTokens, model.maxCompletionTokens)
  // Whether the prompt fits the context is the supplier's call: this bound is deliberately high.
  const promptBound = promptTokenBound(body.messages as ChatMessageLike[], body as Record<string, unknown>)
  const stream = body.stream === true
  const upstreamBody: Record<string, unknown> = {
    ...body,
    model: model.id,
    stream,
    venice_parameters: withoutUpstreamPrompt((body as Record<string, unknown>).venice_parameters),
  }
  // The supplier is asked for exactly what was admitted, under the field the client used.
  delete upstreamBody.max_tokens
  delete upstreamBody.max_completion_tokens
  if (stream) upstreamBody.stream_options = { ...(body.stream_options ?? {}), include_usage: true }
  else delete upstreamBody.stream_options
  const admitted: ValidChat = {
    model,
    stream,
    maxTokens,
    choices: body.n ?? 1,
    promptTokenBound: promptBound,
    holdDiem: 0 as MicroDiem,
    upstreamBody,
    fittable: asked === null,
  }
  return withLimit(admitted, maxTokens, limitField(body))
}

const limitField = (body: ChatBody) =>
  body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens'

/**
 * The request with its token limit lowered to what `confirmed` micro-USDC affords at `askCents`
 * (the ask it was refused at), or null when it was given a limit, when output is not what the
 * balance falls short on, or when less than MIN_FITTED_TOKENS would fit.
 */
export function fitChat(chat: ValidChat, confirmed: number, askCents: number): ValidChat | null {
  if (!chat.fittable || askCents <= 0) return null
  // The most burn the balance pays for at this ask: ceil(burn x ask / 100) <= confirmed.
  const budget = Math.floor((confirmed * 100) / askCents)
  // The limit must fit at every tier the prompt can be billed at: the fewest tokens any affords.
  let perChoice = Number.POSITIVE_INFINITY
  for (const rates of reachableTiers(chat.promptTokenBound, chat.model.prices)) {
    // The hold is one sum rounded up: bound x dearest prompt price + tokens x choices x output,
    // over a million, within the budget exactly when the sum is within budget x a million.
    const prompt = BigInt(chat.promptTokenBound) * BigInt(dearestPromptPrice(rates))
    const left = BigInt(budget) * 1_000_000n - prompt
    if (left <= 0n) return null
    if (rates.outputPerMillion <= 0) continue
    perChoice = Math.min(perChoice, Number(left / (BigInt(rates.outputPerMillion) * BigInt(chat.choices))))
  }
  if (perChoice >= chat.maxTokens) return null
  if (perChoice < Math.min(MIN_FITTED_TOKENS, chat.model.maxCompletionTokens)) return null
  return withLimit(
    chat,
    perChoice,
    'max_tokens' in chat.upstreamBody ? 'max_tokens' : 'max_completion_tokens',
  )
}
