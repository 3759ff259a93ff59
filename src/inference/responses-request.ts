// The stateless Responses facade: a Responses request becomes the supplier's chat call, and the
// chat answer becomes a `response` object. Nothing is stored: `store` and `previous_response_id`
// are accepted and ignored.
import { t } from 'elysia'
import { badRequest } from '../http/errors.ts'
import type { ChatBody } from './chat-request.ts'

const wholePositive = t.Number({ multipleOf: 1, minimum: 1 })

const contentPart = t.Object(
  { type: t.String(), text: t.Optional(t.String()), image_url: t.Optional(t.Any()) },
  { additionalProperties: true },
)

const inputItem = t.Object(
  {
    type: t.Optional(t.String()),
    role: t.Optional(t.Union(['user', 'assistant', 'system', 'developer'].map((r) => t.Literal(r)))),
    content: t.Optional(t.Union([t.String(), t.Array(contentPart)])),
  },
  { additionalProperties: true },
)

export const responsesBodySchema = t.Object(
  {
    model: t.String({ minLength: 1, maxLength: 256 }),
    input: t.Union([t.String({ minLength: 1 }), t.Array(inputItem, { minItems: 1, maxItems: 4096 })]),
    instructions: t.Optional(t.Union([t.String(), t.Null()])),
    max_output_tokens: t.Optional(t.Union([wholePositive, t.Null()])),
    stream: t.Optional(t.Boolean()),
    store: t.Optional(t.Union([t.Boolean(), t.Null()])),
    previous_response_id: t.Optional(t.Union([t.String(), t.Null()])),
    temperature: t.Optional(t.Union([t.Number(), t.Null()])),
    top_p: t.Optional(t.Union([t.Number(), t.Null()])),
  },
  { additionalProperties: true },
)

export type ResponsesBody = typeof responsesBodySchema.static

type ChatPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: unknown }

function chatContent(
  content: string | { type: string; text?: string; image_url?: unknown }[],
): string | ChatPart[] {
  if (typeof content === 'string') return content
  return content.map((part, i): ChatPart => {
    if (
      (part.type === 'input_text' || part.type === 'output_text' || part.type === 'text') &&
      typeof part.text === 'string'
    ) {
      return { type: 'text', text: part.text }
    }
    if (part.type === 'input_image' && part.image_url !== undefined) {
      const url =
        typeof part.image_url === 'string' ? part.image_url : (part.image_url as { url?: unknown }).url
      return { type: 'image_url', image_url: { url } }
    }
    throw badRequest(`input content part ${i} of type '${part.type}' is not supported`, 'unsupported_content')
  })
}

/** The supplier's chat body for a Responses request. */
export function responsesToChat(body: ResponsesBody): ChatBody {
  const messages: ChatBody['messages'] = []
  if (body.instructions) messages.push({ role: 'system', content: body.instructions })
  if (typeof body.input === 'string') {
    messages.push({ role: 'user', content: body.input })
  } else {
    body.input.forEach((item, i) => {
      if ((item.type !== undefined && item.type !== 'message') || item.content === undefined) {
        throw badRequest(`input item ${i} must be a message with a role and content`, 'unsupported_input')
      }
      messages.push({ role: item.role ?? 'user', content: chatContent(item.content) })
    })
  }
  const chat: ChatBody = { model: body.model, messages, stream: body.stream === true }
  if (body.max_output_tokens != null) chat.max_tokens = body.max_output_tokens
  const passthrough = chat as Record<string, unknown>
  if (body.temperature != null) passthrough.temperature = body.temperature
  if (body.top_p != null) passthrough.top_p = body.top_p
  return chat
}

export interface ResponseShape {
  id: string
  model: string
  createdAt: number
  instructions: string | null
  maxOutputTokens: number | null
  temperature: number | null
  topP: number | null
}

export function responseShape(body: ResponsesBody, model: string, requestId: string): ResponseShape {
  return {
    id: `resp_${requestId.slice(4)}`,
    model,
    createdAt: Math.floor(Date.now() / 1000),
    instructions: body.instructions ?? null,
    maxOutputTokens: body.max_output_tokens ?? null,
    temperature: body.temperature ?? null,
    topP: body.top_p ?? null,
  }
}

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed'

export function messageItem(
  shape: ResponseShape,
  text: string,
  status: 'in_progress' | 'completed' | 'incomplete',
) {
  return {
    id: `msg_${shape.id.slice(5)}`,
    type: 'message' as const,
    status,
    role: 'assistant' as const,
    content:
      status === 'in_progress' && text === ''
        ? []
        : [{ type: 'output_text' as const, text, annotations: [] }],
  }
}

/** A `response` object in OpenAI's shape. */
export function responseObject(
  shape: ResponseShape,
  status: ResponseStatus,
  output: ReturnType<typeof messageItem>[],
  usage: { input_tokens: number; output_tokens: number } | null,
  incompleteReason: string | null = null,
) {
  const response: Record<string, unknown> = {
    id: shape.id,
    object: 'response',
    created_at: shape.createdAt,
    status,
    error: null,
    incomplete_details: incompleteReason ? { reason: incompleteReason } : null,
    instructions: shape.instructions,
    max_output_tokens: shape.maxOutputTokens,
    model: shape.model,
    output,
    parallel_tool_calls: false,
    previous_response_id: null,
    store: false,
    temperature: shape.temperature,
    top_p: shape.topP,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
  }
  if (usage) {
    response.usage = {
      input_tokens: usage.input_tokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: usage.output_tokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.input_tokens + usage.output_tokens,
    }
  }
  return response
}
