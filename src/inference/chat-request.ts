// A chat request, validated and admitted: the live text model it names, the max tokens it may
// generate, the worst-case burn the market holds for it, and the body the supplier receives.
import { t } from 'elysia'
import type { CatalogEntry, ModelPrices } from '../catalog/entry.ts'
import { badRequest } from '../http/errors.ts'
import type { MicroDiem } from '../money/units.ts'
import { callableModel } from './callable-model.ts'
import { burnOf } from './meter.ts'
import { type ChatMessageLike, promptTokenBound } from './tokens.ts'

const wholePositive = t.Number({ multipleOf: 1, minimum: 1 })

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
  },
  { additionalProperties: true },
)

export type ChatBody = typeof chatBodySchema.static

export interface TextModel {
  id: string
  prices: Required<Pick<ModelPrices, 'inputPerMillion' | 'outputPerMillion'>>
  contextTokens: number
  maxCompletionTokens: number
}

/** The catalog entry of a callable text model, or the contract's 404 / 400. */
export function liveTextModel(entry: CatalogEntry | undefined, requested: string): TextModel {
  const { row, prices } = callableModel(entry, requested, 'text', ['inputPerMillion', 'outputPerMillion'])
  return {
    id: row.id,
    prices: { inputPerMillion: prices.inputPerMillion, outputPerMillion: prices.outputPerMillion },
    contextTokens: row.context_length ?? Number.MAX_SAFE_INTEGER,
    maxCompletionTokens: row.max_completion_tokens ?? Number.MAX_SAFE_INTEGER,
  }
}

export interface AdmittedChat {
  model: TextModel
  stream: boolean
  maxTokens: number
  promptTokenBound: number
  burnEstimate: MicroDiem
  upstreamBody: Record<string, unknown>
}

export function admitChat(body: ChatBody, model: TextModel, defaultMaxTokens: number): AdmittedChat {
  const asked = body.max_completion_tokens ?? body.max_tokens ?? null
  if (asked !== null && asked > model.maxCompletionTokens) {
    throw badRequest(
      `max_tokens ${asked} exceeds ${model.id}'s limit of ${model.maxCompletionTokens}`,
      'max_tokens_too_large',
    )
  }
  const maxTokens = asked ?? Math.min(defaultMaxTokens, model.maxCompletionTokens)
  // Whether the prompt fits the context is the supplier's call: this bound is deliberately high.
  const tools = (body as Record<string, unknown>).tools
  const promptBound = promptTokenBound(body.messages as ChatMessageLike[], tools ? JSON.stringify(tools) : '')
  const stream = body.stream === true
  const upstreamBody: Record<string, unknown> = { ...body, model: model.id, stream }
  // The supplier is asked for exactly what was admitted, under the field the client used.
  delete upstreamBody.max_tokens
  delete upstreamBody.max_completion_tokens
  upstreamBody[body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens'] = maxTokens
  if (stream) upstreamBody.stream_options = { ...(body.stream_options ?? {}), include_usage: true }
  else delete upstreamBody.stream_options
  return {
    model,
    stream,
    maxTokens,
    promptTokenBound: promptBound,
    burnEstimate: burnOf({ promptTokens: promptBound, completionTokens: maxTokens }, model.prices),
    upstreamBody,
  }
}
