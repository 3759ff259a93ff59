// Anthropic's Messages API, answer side: a `message` with its content blocks (thinking, text,
// tool_use), its stop reason and usage, made from a supplier's chat answer.

import { contentText } from './content-parts.ts'
import { isRecord } from './json-object.ts'
import { objectOf } from './json-prefix.ts'
import type { Usage } from './meter.ts'
import { reasoningText } from './responses-object.ts'
import { ownCallIds } from './stream-tool-calls.ts'

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal'

/** What a message says about its request: its id, model and the stop sequences it was given. */
export interface MessageShape {
  id: string
  model: string
  stopSequences: string[]
}

export type ContentBlock = Record<string, unknown> & { type: string }

/** Usage as Anthropic reports it; the counts are the ones billed. */
export interface MessagesUsage {
  input_tokens: number
  output_tokens: number
  cache_creation_input_tokens: number | null
  cache_read_input_tokens: number | null
}

/**
 * The billed usage in Anthropic's terms: input_tokens are the prompt tokens billed at the input
 * price, cache_read_input_tokens and cache_creation_input_tokens the ones billed as cache reads and
 * writes (null when the supplier reported none), so the three add up to the prompt billed.
 */
export function messagesUsage(billed: Usage): MessagesUsage {
  const read = billed.cachedTokens ?? 0
  const written = billed.cacheWriteTokens ?? 0
  return {
    input_tokens: billed.promptTokens - read - written,
    output_tokens: billed.completionTokens,
    cache_creation_input_tokens: billed.cacheWriteTokens ?? null,
    cache_read_input_tokens: billed.cachedTokens ?? null,
  }
}

/**
 * Why the answer stopped, and the stop sequence that stopped it. A supplier's plain `stop` is a
 * stop sequence only when it names the one it matched (vLLM's `stop_reason`, SGLang's
 * `matched_stop`) and that is one the request gave; otherwise it is the model's own end_turn.
 */
export function stopReason(
  choice: { finish_reason?: unknown; stop_reason?: unknown; matched_stop?: unknown },
  stopSequences: string[],
  calledTools: boolean,
): { stop_reason: StopReason; stop_sequence: string | null } {
  const finish = choice.finish_reason
  if (finish === 'length') return { stop_reason: 'max_tokens', stop_sequence: null }
  if (finish === 'content_filter') return { stop_reason: 'refusal', stop_sequence: null }
  if (finish === 'tool_calls' || finish === 'function_call' || calledTools) {
    return { stop_reason: 'tool_use', stop_sequence: null }
  }
  const matched = [choice.stop_reason, choice.matched_stop].find(
    (value): value is string => typeof value === 'string' && stopSequences.includes(value),
  )
  if (matched !== undefined) return { stop_reason: 'stop_sequence', stop_sequence: matched }
  return { stop_reason: 'end_turn', stop_sequence: null }
}

/**
 * A tool call's arguments as the parsed input Anthropic gives: the object they make (cut short or
 * turned invalid, the one their safe beginning makes, as a stream of them gives it); text that
 * never began a JSON object is kept whole.
 */
export function toolInput(args: string): Record<string, unknown> {
  if (args.trim() === '') return {}
  return objectOf(args) ?? { arguments: args }
}

export const thinkingBlock = (thinking: string): ContentBlock => ({
  type: 'thinking',
  thinking,
  signature: '',
})
export const textBlock = (text: string): ContentBlock => ({ type: 'text', text, citations: null })
export const toolUseBlock = (id: string, name: string, input: Record<string, unknown>): ContentBlock => ({
  type: 'tool_use',
  id,
  name,
  input,
})

/** The id of a tool call the supplier gave none. */
export const toolUseId = (shape: MessageShape, index: number) => `toolu_${shape.id.slice(4)}_${index}`

interface ChatChoice {
  finish_reason?: unknown
  message?: {
    content?: unknown
    refusal?: unknown
    reasoning_content?: unknown
    reasoning?: unknown
    tool_calls?: { id?: unknown; function?: { name?: unknown; arguments?: unknown } }[]
  }
}

/** The content blocks of a buffered chat answer (thinking, text, tool_use) and why it stopped. */
export function messageContent(shape: MessageShape, chat: Record<string, unknown>) {
  const choice = ((chat.choices as ChatChoice[] | undefined)?.[0] ?? {}) as ChatChoice
  const message = choice.message ?? {}
  const content: ContentBlock[] = []
  // Content may come as parts (Mistral's): their thinking is thinking too.
  const { text, thinking } = contentText(message.content)
  const reasoning = reasoningText(message) + thinking
  if (reasoning) content.push(thinkingBlock(reasoning))
  const refusal = typeof message.refusal === 'string' ? message.refusal : ''
  if (text || refusal) content.push(textBlock(text || refusal))
  // A call that is not an object is no call (a supplier's null).
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls.filter((call) => isRecord(call)) : []
  const ids = ownCallIds(
    calls.map((call) => call.id),
    (i) => toolUseId(shape, i),
  )
  calls.forEach((call, i) => {
    const id = ids[i]!
    const name = typeof call.function?.name === 'string' ? call.function.name : ''
    const args = typeof call.function?.arguments === 'string' ? call.function.arguments : ''
    content.push(toolUseBlock(id, name, toolInput(args)))
  })
  const stop = stopReason(
    refusal && !text ? { finish_reason: 'content_filter' } : choice,
    shape.stopSequences,
    calls.length > 0,
  )
  return { content, ...stop }
}

/** A `message` in Anthropic's shape. */
export function messageObject(
  shape: MessageShape,
  content: ContentBlock[],
  stop: { stop_reason: StopReason | null; stop_sequence: string | null },
  usage: MessagesUsage,
) {
  return {
    id: shape.id,
    type: 'message',
    role: 'assistant',
    model: shape.model,
    content,
    stop_reason: stop.stop_reason,
    stop_sequence: stop.stop_sequence,
    usage,
  }
}
