// The stateless Responses facade, request side: a Responses request becomes the supplier's chat
// call. Every field is either carried over to its chat equivalent or refused with a 400 that names
// it: an agent must never get an answer to a question it did not ask. Nothing is stored: `store`
// and `previous_response_id` are accepted and ignored, and an `item_reference` is refused.
import { t } from 'elysia'
import { badRequest } from '../errors.ts'
import { refuseOutOfRange } from './chat-checks.ts'
import type { ChatBody } from './chat-request.ts'
import { isRecord, shown } from './json-object.ts'
import { chatToolChoice, chatTools } from './responses-tools.ts'

const wholePositive = t.Number({ multipleOf: 1, minimum: 1 })
const nullable = <T extends Parameters<typeof t.Optional>[0]>(schema: T) =>
  t.Optional(t.Union([schema, t.Null()]))

export const responsesBodySchema = t.Object(
  {
    model: t.String({ minLength: 1, maxLength: 256 }),
    input: t.Union([
      t.String({ minLength: 1 }),
      t.Array(t.Object({}, { additionalProperties: true }), { minItems: 1, maxItems: 4096 }),
    ]),
    instructions: nullable(t.String()),
    max_output_tokens: nullable(wholePositive),
    stream: t.Optional(t.Boolean()),
    store: nullable(t.Boolean()),
    previous_response_id: nullable(t.String()),
    temperature: nullable(t.Number()),
    top_p: nullable(t.Number()),
    parallel_tool_calls: nullable(t.Boolean()),
    user: nullable(t.String()),
  },
  { additionalProperties: true },
)

export type ResponsesBody = typeof responsesBodySchema.static & Record<string, unknown>

const invalid = (message: string, code = 'invalid_request') => badRequest(message, code)
const unsupported = (message: string) => badRequest(message, 'unsupported_parameter')

/**
 * Fields the facade honours. The rest of OpenAI's Responses fields (background, conversation,
 * prompt, max_tool_calls, top_logprobs, hosted tools ...) need stored state or tools the gateway
 * does not run, and are refused by name.
 */
const KNOWN_FIELDS = new Set([
  'model',
  'input',
  'instructions',
  'max_output_tokens',
  'stream',
  'stream_options',
  'store',
  'previous_response_id',
  'temperature',
  'top_p',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'text',
  'reasoning',
  'user',
  'safety_identifier',
  'prompt_cache_key',
  'metadata',
  'include',
  'truncation',
  'service_tier',
  'background',
])

/** `include` values that ask for nothing the facade withholds (reasoning comes back as text). */
const INCLUDABLE = new Set(['reasoning.encrypted_content'])

type Item = Record<string, unknown>
type ChatMessage = Record<string, unknown> & { role: string }

function textOfParts(parts: unknown, where: string): string {
  if (typeof parts === 'string') return parts
  if (!Array.isArray(parts)) throw invalid(`${where} must be a string or an array of content parts`)
  return parts
    .map((part, i) => {
      const text = isRecord(part) ? (part.text ?? part.refusal) : undefined
      if (typeof text !== 'string') {
        throw unsupported(
          `${where}[${i}] of type '${shown(isRecord(part) ? part.type : typeof part)}' is not supported here`,
        )
      }
      return text
    })
    .join('')
}

function userContent(content: unknown, where: string): string | Record<string, unknown>[] {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) throw invalid(`${where} must be a string or an array of content parts`)
  return content.map((part, i) => {
    const at = `${where}[${i}]`
    if (!isRecord(part)) throw invalid(`${at} must be an object`)
    if (
      ['input_text', 'output_text', 'text'].includes(part.type as string) &&
      typeof part.text === 'string'
    ) {
      return { type: 'text', text: part.text }
    }
    if (part.type === 'input_image') {
      const url = isRecord(part.image_url) ? part.image_url.url : part.image_url
      if (typeof url !== 'string') {
        throw unsupported(`${at}: an input_image needs an image_url (file_id needs stored files)`)
      }
      const detail = typeof part.detail === 'string' && part.detail !== 'auto' ? { detail: part.detail } : {}
      return { type: 'image_url', image_url: { url, ...detail } }
    }
    throw unsupported(`${at} of type '${shown(part.type)}' is not supported (input_text and input_image are)`)
  })
}

const MESSAGE_ROLES = new Set(['user', 'assistant', 'system', 'developer'])

/** The chat messages of a Responses `input`, one item at a time. */
function inputMessages(input: ResponsesBody['input']): ChatMessage[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }]
  const messages: ChatMessage[] = []
  const calls = new Set<string>()
  /** Each call's place in the input, until its output is seen. */
  const unanswered = new Map<string, number>()
  input.forEach((item: Item, i) => {
    const at = `input[${i}]`
    // OpenAI's item_reference may leave out its type: an item with an id and no role is one.
    const reference = item.role === undefined && typeof item.id === 'string'
    const type = item.type ?? (reference ? 'item_reference' : 'message')
    if (type === 'message') {
      const role = item.role as string
      if (!MESSAGE_ROLES.has(role)) throw invalid(`${at}.role must be user, assistant, system or developer`)
      if (item.content === undefined) throw invalid(`${at}.content is required`)
      // An assistant turn is text to a chat supplier; a user turn may carry images.
      const content =
        role === 'user'
          ? userContent(item.content, `${at}.content`)
          : textOfParts(item.content, `${at}.content`)
      messages.push({ role, content })
      return
    }
    if (type === 'function_call') {
      if (
        typeof item.call_id !== 'string' ||
        typeof item.name !== 'string' ||
        typeof item.arguments !== 'string'
      ) {
        throw invalid(`${at}: a function_call needs call_id, name and arguments (strings)`)
      }
      calls.add(item.call_id)
      unanswered.set(item.call_id, i)
      const call = {
        id: item.call_id,
        type: 'function',
        function: { name: item.name, arguments: item.arguments },
      }
      // Calls of one turn are one assistant message, with the turn's text if it had any.
      const last = messages.at(-1)
      if (last?.role === 'assistant') {
        last.tool_calls = [...((last.tool_calls as unknown[]) ?? []), call]
      } else {
        messages.push({ role: 'assistant', content: null, tool_calls: [call] })
      }
      return
    }
    if (type === 'function_call_output') {
      if (typeof item.call_id !== 'string') throw invalid(`${at}: a function_call_output needs its call_id`)
      // Its call in an earlier response (previous_response_id) is not stored here: a supplier given an
      // answer to no call refuses it or answers a conversation it cannot see.
      if (!calls.has(item.call_id)) {
        throw invalid(
          `${at}: function_call_output ${shown(item.call_id)} answers no function_call in this input; nothing is stored here, so send the call before its output`,
        )
      }
      const content = textOfParts(item.output, `${at}.output`)
      unanswered.delete(item.call_id)
      messages.push({ role: 'tool', tool_call_id: item.call_id, content })
      return
    }
    // The model's own reasoning from an earlier turn, or a reference to it: a chat supplier takes
    // none back, so neither changes what it is asked.
    if (type === 'reasoning') return
    if (type === 'item_reference' && typeof item.id === 'string' && item.id.startsWith('rs_')) return
    if (type === 'item_reference') {
      throw unsupported(
        `${at}: item_reference needs a stored response and this endpoint stores none; send the item itself (with the AI SDK: providerOptions.openai.store = false)`,
      )
    }
    throw unsupported(
      `${at} of type '${shown(type)}' is not supported (message, function_call, function_call_output are)`,
    )
  })
  // As OpenAI: a call sent back must come with its output, or a supplier guesses at the result.
  const [dangling] = unanswered
  if (dangling) {
    throw invalid(
      `input[${dangling[1]}]: function_call ${shown(dangling[0])} has no function_call_output in this input; send each call's output after it`,
    )
  }
  return messages
}

function chatResponseFormat(text: unknown): Record<string, unknown> {
  if (text == null) return {}
  if (!isRecord(text)) throw invalid('text must be an object')
  const chat: Record<string, unknown> = {}
  for (const key of Object.keys(text)) {
    if (key !== 'format' && key !== 'verbosity') throw unsupported(`text.${key} is not supported`)
  }
  if (text.verbosity != null) chat.verbosity = text.verbosity
  const format = text.format
  if (format == null || (isRecord(format) && format.type === 'text')) return chat
  if (!isRecord(format)) throw invalid('text.format must be an object')
  if (format.type === 'json_object') return { ...chat, response_format: { type: 'json_object' } }
  if (format.type !== 'json_schema') {
    throw unsupported(
      `text.format of type '${shown(format.type)}' is not supported (text, json_schema, json_object are)`,
    )
  }
  if (typeof format.name !== 'string' || !isRecord(format.schema)) {
    throw invalid('text.format json_schema needs a name and a schema')
  }
  const schema: Record<string, unknown> = { name: format.name, schema: format.schema }
  if (format.strict != null) schema.strict = format.strict
  if (typeof format.description === 'string') schema.description = format.description
  return { ...chat, response_format: { type: 'json_schema', json_schema: schema } }
}

function checkMetadata(metadata: unknown): Record<string, string> {
  if (metadata == null) return {}
  const ok =
    isRecord(metadata) &&
    Object.keys(metadata).length <= 16 &&
    Object.entries(metadata).every(([k, v]) => k.length <= 64 && typeof v === 'string' && v.length <= 512)
  if (!ok)
    throw invalid('metadata must be at most 16 string values (keys up to 64, values up to 512 characters)')
  return metadata as Record<string, string>
}

/** What the request asked of the reasoning: the supplier's effort, and whether to show it as summary. */
export interface ReasoningAsk {
  effort: string | null
  summary: string | null
}

function reasoningAsk(reasoning: unknown): ReasoningAsk {
  if (reasoning == null) return { effort: null, summary: null }
  if (!isRecord(reasoning)) throw invalid('reasoning must be an object')
  for (const key of Object.keys(reasoning)) {
    if (!['effort', 'summary', 'generate_summary'].includes(key))
      throw unsupported(`reasoning.${key} is not supported`)
  }
  const summary = reasoning.summary ?? reasoning.generate_summary ?? null
  if (summary !== null && !['auto', 'concise', 'detailed'].includes(summary as string)) {
    throw invalid("reasoning.summary must be 'auto', 'concise' or 'detailed'")
  }
  const effort = reasoning.effort ?? null
  if (effort !== null && typeof effort !== 'string') throw invalid('reasoning.effort must be a string')
  return { effort, summary: summary as string | null }
}

function checkOtherFields(body: ResponsesBody): void {
  for (const key of Object.keys(body)) {
    if (!KNOWN_FIELDS.has(key)) throw unsupported(`${key} is not supported on /v1/responses`)
  }
  if (body.background === true)
    throw unsupported('background is not supported: answers are streamed or buffered')
  if (body.truncation != null && body.truncation !== 'disabled') {
    throw unsupported("truncation 'auto' is not supported: the prompt is sent whole")
  }
  if (body.service_tier != null && body.service_tier !== 'auto' && body.service_tier !== 'default') {
    throw unsupported(`service_tier '${shown(body.service_tier)}' is not supported`)
  }
  if (body.include != null) {
    if (!Array.isArray(body.include)) throw invalid('include must be an array')
    for (const value of body.include) {
      if (!INCLUDABLE.has(value as string)) throw unsupported(`include '${shown(value)}' is not supported`)
    }
  }
  refuseOutOfRange(body, ['temperature', 'top_p'])
  if (body.stream_options != null && !isRecord(body.stream_options))
    throw invalid('stream_options must be an object')
}

/** What the response object says back about its request. */
export interface ResponseShape {
  id: string
  model: string
  createdAt: number
  instructions: string | null
  maxOutputTokens: number | null
  temperature: number | null
  topP: number | null
  tools: unknown[]
  toolChoice: unknown
  parallelToolCalls: boolean
  text: Record<string, unknown>
  reasoning: ReasoningAsk
  user: string | null
  metadata: Record<string, string>
}

export interface TranslatedResponses {
  chat: ChatBody
  reasoning: ReasoningAsk
  metadata: Record<string, string>
}

/** The supplier's chat body for a Responses request, or a 400 naming what cannot be honoured. */
export function responsesToChat(body: ResponsesBody): TranslatedResponses {
  checkOtherFields(body)
  const metadata = checkMetadata(body.metadata)
  const reasoning = reasoningAsk(body.reasoning)
  const messages: ChatMessage[] = []
  if (body.instructions) messages.push({ role: 'system', content: body.instructions })
  messages.push(...inputMessages(body.input))
  if (messages.length === 0) throw invalid('input has no message to answer')
  const chat: Record<string, unknown> = { model: body.model, messages, stream: body.stream === true }
  if (body.max_output_tokens != null) chat.max_tokens = body.max_output_tokens
  // Prompt fields (tools, tool_choice, response_format) sit where the hold counts them.
  const tools = chatTools(body.tools) ?? []
  if (tools.length > 0) chat.tools = tools
  const toolChoice = chatToolChoice(body.tool_choice, tools)
  if (toolChoice !== undefined) chat.tool_choice = toolChoice
  Object.assign(chat, chatResponseFormat(body.text))
  if (reasoning.effort !== null) chat.reasoning_effort = reasoning.effort
  for (const field of [
    'temperature',
    'top_p',
    'parallel_tool_calls',
    'user',
    'safety_identifier',
    'prompt_cache_key',
  ]) {
    if (body[field] != null) chat[field] = body[field]
  }
  return { chat: chat as ChatBody, reasoning, metadata }
}

export function responseShape(
  body: ResponsesBody,
  translated: TranslatedResponses,
  model: string,
  requestId: string,
): ResponseShape {
  const text = isRecord(body.text) ? body.text : {}
  return {
    id: `resp_${requestId.slice(4)}`,
    model,
    createdAt: Math.floor(Date.now() / 1000),
    instructions: body.instructions ?? null,
    maxOutputTokens: body.max_output_tokens ?? null,
    temperature: body.temperature ?? null,
    topP: body.top_p ?? null,
    tools: Array.isArray(body.tools) ? body.tools : [],
    toolChoice: body.tool_choice ?? 'auto',
    parallelToolCalls: body.parallel_tool_calls ?? true,
    text: { ...text, format: text.format ?? { type: 'text' } },
    reasoning: translated.reasoning,
    user: body.user ?? null,
    metadata: translated.metadata,
  }
}
