// Anthropic's Messages API, request side: a Messages request becomes the supplier's chat call.
// Every field, top-level, of a message or of a tool, is carried over to its chat equivalent or
// refused with a 400 that names it. Hints that change nothing in the answer (cache_control,
// service_tier 'auto', a tool's eager_input_streaming) are accepted; the model's earlier thinking
// blocks are dropped, as a chat supplier takes no reasoning back.
import { t } from 'elysia'
import type { CatalogEntry } from '../catalog/entry.ts'
import { badRequest } from '../errors.ts'
import type { ChatBody } from './chat-request.ts'
import { isRecord, shown } from './json-object.ts'
import { checkOtherFields, metadataUser } from './messages-fields.ts'
import { chatToolChoice, chatTools, checkToolUsesAnswered } from './messages-tools.ts'

const wholePositive = t.Number({ multipleOf: 1, minimum: 1 })
const blocks = t.Array(t.Object({}, { additionalProperties: true }), { maxItems: 4096 })

const messageSchema = t.Object(
  {
    // Anthropic's SystemMessageParam: instructions from that point of the conversation on.
    role: t.Union([t.Literal('user'), t.Literal('assistant'), t.Literal('system')]),
    content: t.Union([t.String(), blocks]),
  },
  { additionalProperties: true },
)

/** What count_tokens reads: the prompt, without the answer's limits. */
const promptFields = {
  model: t.String({ minLength: 1, maxLength: 256 }),
  messages: t.Array(messageSchema, { minItems: 1, maxItems: 4096 }),
  system: t.Optional(t.Union([t.String(), blocks])),
}

export const countTokensBodySchema = t.Object(promptFields, { additionalProperties: true })

export const messagesBodySchema = t.Object(
  {
    ...promptFields,
    max_tokens: wholePositive,
    stream: t.Optional(t.Boolean()),
    // Anthropic's range, narrower than OpenAI's: a supplier would take 1.5 as asked.
    temperature: t.Optional(t.Number({ minimum: 0, maximum: 1 })),
    top_p: t.Optional(t.Number({ minimum: 0, maximum: 1 })),
    top_k: t.Optional(t.Number({ multipleOf: 1, minimum: 0 })),
    stop_sequences: t.Optional(t.Array(t.String({ minLength: 1 }), { maxItems: 16 })),
  },
  { additionalProperties: true },
)

export type MessagesBody = typeof messagesBodySchema.static & Record<string, unknown>
type PromptBody = typeof countTokensBodySchema.static & Record<string, unknown>

const invalid = (message: string) => badRequest(message, 'invalid_request')

const unsupported = (message: string) => badRequest(message, 'unsupported_parameter')

type Block = Record<string, unknown>
type ChatMessage = Record<string, unknown> & { role: string }

/** What a request needs of its model beyond text, for the capability check. */
export interface ModelNeeds {
  vision: boolean
  tools: boolean
  reasoning: boolean
  /** output_config.effort: a reasoning effort, which a model without reasoning cannot take. */
  effort: boolean
  schema: boolean
}

function textOf(content: unknown, where: string): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) throw invalid(`${where} must be a string or an array of text blocks`)
  return content
    .map((block, i) => {
      if (!isRecord(block) || block.type !== 'text') {
        const type = isRecord(block) ? block.type : typeof block
        throw unsupported(`${where}[${i}] of type '${shown(type)}' is not supported here (text is)`)
      }
      return blockText(block, `${where}[${i}]`)
    })
    .join('\n')
}

/** A text block's text, or a 400 when it has none (Anthropic refuses an empty one too). */
function blockText(block: Block, at: string): string {
  if (typeof block.text !== 'string') throw invalid(`${at}.text must be a string`)
  if (block.text === '') throw invalid(`${at}.text: text content blocks must be non-empty`)
  return block.text
}

function imagePart(block: Block, at: string): Record<string, unknown> {
  const source = block.source
  if (isRecord(source) && source.type === 'base64') {
    if (typeof source.media_type !== 'string' || typeof source.data !== 'string') {
      throw invalid(`${at}.source needs media_type and data`)
    }
    return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } }
  }
  if (isRecord(source) && source.type === 'url' && typeof source.url === 'string') {
    return { type: 'image_url', image_url: { url: source.url } }
  }
  throw unsupported(`${at}.source must be base64 or url (file sources need stored files)`)
}

/** A tool's result as a chat tool message; an error result says so in its text. */
function toolResult(block: Block, at: string, used: Set<string>): ChatMessage {
  if (typeof block.tool_use_id !== 'string') throw invalid(`${at}: a tool_result needs its tool_use_id`)
  // As Anthropic: a result answers a call the model made, or a supplier reads it out of context.
  if (!used.has(block.tool_use_id)) {
    throw invalid(
      `${at}: tool_use_id '${block.tool_use_id}' answers no tool_use of an earlier assistant turn`,
    )
  }
  const text = block.content == null ? '' : textOf(block.content, `${at}.content`)
  const content = block.is_error === true ? `Error: ${text}` : text
  return { role: 'tool', tool_call_id: block.tool_use_id, content }
}

function userMessages(
  content: string | Block[],
  at: string,
  needs: ModelNeeds,
  used: Set<string>,
): ChatMessage[] {
  if (typeof content === 'string') return [{ role: 'user', content }]
  const results: ChatMessage[] = []
  const parts: Record<string, unknown>[] = []
  content.forEach((block, i) => {
    const where = `${at}[${i}]`
    if (block.type === 'text') parts.push({ type: 'text', text: blockText(block, where) })
    else if (block.type === 'image') {
      needs.vision = true
      parts.push(imagePart(block, where))
    } else if (block.type === 'tool_result') results.push(toolResult(block, where, used))
    else {
      throw unsupported(
        `${where} of type '${shown(block.type)}' is not supported (text, image, tool_result are)`,
      )
    }
  })
  // Tool results answer the calls of the turn before, so they come first, as Anthropic requires.
  if (parts.length > 0) results.push({ role: 'user', content: parts })
  return results
}

function assistantMessage(content: string | Block[], at: string, used: Set<string>): ChatMessage {
  if (typeof content === 'string') return { role: 'assistant', content }
  let text = ''
  const calls: Record<string, unknown>[] = []
  content.forEach((block, i) => {
    const where = `${at}[${i}]`
    if (block.type === 'text') text += blockText(block, where)
    else if (block.type === 'tool_use') {
      if (typeof block.id !== 'string' || typeof block.name !== 'string' || !isRecord(block.input)) {
        throw invalid(`${where}: a tool_use needs id, name and an input object`)
      }
      used.add(block.id)
      const fn = { name: block.name, arguments: JSON.stringify(block.input) }
      calls.push({ id: block.id, type: 'function', function: fn })
    } else if (block.type !== 'thinking' && block.type !== 'redacted_thinking') {
      throw unsupported(
        `${where} of type '${shown(block.type)}' is not supported (text, tool_use, thinking are)`,
      )
    }
  })
  const message: ChatMessage = { role: 'assistant', content: calls.length > 0 && !text ? null : text }
  if (calls.length > 0) message.tool_calls = calls
  return message
}

function chatMessages(body: PromptBody, needs: ModelNeeds): ChatMessage[] {
  const messages: ChatMessage[] = []
  if (body.system != null) {
    const system = textOf(body.system, 'system')
    if (system) messages.push({ role: 'system', content: system })
  }
  // A system message between a turn's tool calls and their results waits for the results: a chat
  // supplier takes tool messages only right after the calls they answer.
  const held: ChatMessage[] = []
  /** The ids of the tool_use blocks so far. */
  const used = new Set<string>()
  body.messages.forEach((message, i) => {
    for (const key of Object.keys(message)) {
      if (key !== 'role' && key !== 'content') throw unsupported(`messages[${i}].${key} is not supported`)
    }
    const at = `messages[${i}].content`
    const content = message.content as string | Block[]
    if (message.role === 'system') {
      const text = textOf(content, at)
      const last = messages.at(-1)
      const waits = held.length > 0 || (last?.role === 'assistant' && last.tool_calls !== undefined)
      if (text) (waits ? held : messages).push({ role: 'system', content: text })
      return
    }
    const turn =
      message.role === 'user' ? userMessages(content, at, needs, used) : [assistantMessage(content, at, used)]
    const results = turn.filter((m) => m.role === 'tool').length
    messages.push(...turn.slice(0, results), ...held.splice(0), ...turn.slice(results))
  })
  checkToolUsesAnswered(body.messages)
  return messages.concat(held)
}

/** A thinking budget as the supplier's reasoning effort: the nearest of its three levels. */
export function effortOfBudget(budget: number): string {
  if (budget < 4096) return 'low'
  return budget < 16384 ? 'medium' : 'high'
}

/** The supplier's reasoning effort `thinking` and `output_config.effort` ask for; null for its default. */
function reasoningEffort(body: MessagesBody, needs: ModelNeeds): string | null {
  let effort: string | null = null
  const thinking = body.thinking
  if (thinking != null) {
    if (!isRecord(thinking)) throw invalid('thinking must be an object')
    // Adaptive lets the model decide whether to think, which any model honours (one without
    // reasoning decides not to): the supplier's default. Claude Code sends it on every request.
    if (thinking.type === 'enabled') {
      const budget = thinking.budget_tokens
      if (
        typeof budget !== 'number' ||
        !Number.isInteger(budget) ||
        budget < 1 ||
        budget >= body.max_tokens
      ) {
        throw invalid('thinking.budget_tokens must be a whole number below max_tokens')
      }
      needs.reasoning = true
      effort = effortOfBudget(budget)
    } else if (thinking.type !== 'adaptive' && thinking.type !== 'disabled') {
      throw unsupported(
        `thinking of type '${shown(thinking.type)}' is not supported (enabled, adaptive, disabled are)`,
      )
    }
  }
  const config = body.output_config
  if (isRecord(config) && config.effort != null) {
    if (!['low', 'medium', 'high', 'xhigh', 'max'].includes(config.effort as string)) {
      throw unsupported("output_config.effort must be 'low', 'medium', 'high', 'xhigh' or 'max'")
    }
    needs.effort = true
    // A supplier's efforts end at high: the two above it ask for the most it has.
    effort = config.effort === 'xhigh' || config.effort === 'max' ? 'high' : (config.effort as string)
  }
  return effort
}

/** output_config.format as the supplier's response_format. */
function responseFormat(config: unknown, needs: ModelNeeds): Record<string, unknown> {
  if (config == null) return {}
  if (!isRecord(config)) throw invalid('output_config must be an object')
  for (const key of Object.keys(config)) {
    if (key !== 'format' && key !== 'effort') throw unsupported(`output_config.${key} is not supported`)
  }
  const format = config.format
  if (format == null) return {}
  if (!isRecord(format) || format.type !== 'json_schema' || !isRecord(format.schema)) {
    throw unsupported("output_config.format must be {type: 'json_schema', schema}")
  }
  needs.schema = true
  return {
    response_format: {
      type: 'json_schema',
      json_schema: { name: 'output', schema: format.schema, strict: true },
    },
  }
}

export interface TranslatedMessages {
  chat: ChatBody
  needs: ModelNeeds
  stopSequences: string[]
}

const noNeeds = (): ModelNeeds => ({
  vision: false,
  tools: false,
  reasoning: false,
  effort: false,
  schema: false,
})

/** The supplier's chat body for a Messages request, or a 400 naming what cannot be honoured. */
export function messagesToChat(body: MessagesBody): TranslatedMessages {
  checkOtherFields(body)
  const needs = noNeeds()
  const messages = chatMessages(body, needs)
  if (!messages.some((message) => message.role !== 'system')) throw invalid('messages has nothing to answer')
  const chat: Record<string, unknown> = {
    model: body.model,
    messages,
    stream: body.stream === true,
    max_tokens: body.max_tokens,
  }
  // Prompt fields (tools, tool_choice, response_format) sit where the hold counts them.
  Object.assign(chat, chatPromptFields(body, needs))
  const effort = reasoningEffort(body, needs)
  if (effort !== null) chat.reasoning_effort = effort
  for (const field of ['temperature', 'top_p', 'top_k'] as const) {
    if (body[field] != null) chat[field] = body[field]
  }
  const stopSequences = body.stop_sequences ?? []
  if (stopSequences.length > 0) chat.stop = stopSequences
  Object.assign(chat, metadataUser(body.metadata))
  return { chat: chat as ChatBody, needs, stopSequences }
}

/** The chat body's prompt fields for a Messages prompt: tools, tool_choice, response_format. */
function chatPromptFields(body: PromptBody, needs: ModelNeeds): Record<string, unknown> {
  const tools = chatTools(body.tools, needs)
  const fields: Record<string, unknown> = tools && tools.length > 0 ? { tools } : {}
  return Object.assign(
    fields,
    chatToolChoice(body.tool_choice, tools),
    responseFormat(body.output_config, needs),
  )
}

/**
 * The chat messages and prompt fields of a count_tokens request, as messagesToChat sends them: its
 * count is the one a stream's message_start gives for the same prompt.
 */
export function promptOf(body: PromptBody): { messages: ChatMessage[]; fields: Record<string, unknown> } {
  // A field /v1/messages refuses (an edit that would change the prompt, mcp_servers) is refused
  // here too: a prompt is never counted as if it could be sent without it.
  checkOtherFields(body)
  const needs = noNeeds()
  return { messages: chatMessages(body, needs), fields: chatPromptFields(body, needs) }
}

const CAPABILITY: Record<keyof ModelNeeds, [string, string]> = {
  vision: ['supportsVision', 'image blocks'],
  tools: ['supportsFunctionCalling', 'tools'],
  reasoning: ['supportsReasoning', 'thinking'],
  effort: ['supportsReasoning', 'output_config.effort'],
  schema: ['supportsResponseSchema', 'output_config.format'],
}

/** A 400 naming the field the model cannot honour; a capability the catalog does not state passes. */
export function checkCapabilities(needs: ModelNeeds, entry: CatalogEntry | undefined): void {
  const capabilities = entry?.row.capabilities ?? {}
  for (const need of Object.keys(CAPABILITY) as (keyof ModelNeeds)[]) {
    const [capability, field] = CAPABILITY[need]
    if (needs[need] && capabilities[capability] === false) {
      throw unsupported(`${field}: model '${entry!.row.id}' does not support ${field}`)
    }
  }
}
