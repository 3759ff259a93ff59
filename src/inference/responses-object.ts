// The stateless Responses facade, answer side: a `response` object in OpenAI's shape, and its
// output items (reasoning, message, function_call) made from a supplier's chat answer.

import { contentText } from './content-parts.ts'
import { isRecord } from './json-object.ts'
import { argumentsText, JsonPrefix } from './json-prefix.ts'
import type { Usage } from './meter.ts'
import type { ResponseShape } from './responses-request.ts'
import { ownCallIds } from './stream-tool-calls.ts'

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed'
export type ItemStatus = 'in_progress' | 'completed' | 'incomplete'
export type OutputItem = Record<string, unknown> & { id: string; type: string }

/** Usage as a Responses answer reports it; the counts are the ones billed. */
export interface ResponsesUsage {
  input_tokens: number
  output_tokens: number
  cached_tokens: number
  reasoning_tokens: number
}

const count = (value: unknown) =>
  typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0

/** The billed counts, cache reads among them, with the reasoning tokens the supplier's usage gives. */
export function responsesUsage(billed: Usage, supplierUsage: unknown): ResponsesUsage {
  const usage = (supplierUsage ?? {}) as { completion_tokens_details?: { reasoning_tokens?: unknown } }
  return {
    input_tokens: billed.promptTokens,
    output_tokens: billed.completionTokens,
    // The cache reads billed as such: a supplier's count the meter could not take was billed as input.
    cached_tokens: billed.cachedTokens ?? 0,
    reasoning_tokens: Math.min(
      count(usage.completion_tokens_details?.reasoning_tokens),
      billed.completionTokens,
    ),
  }
}

/** Why an answer ended short, from the supplier's finish_reason; null when it ended whole. */
export function incompleteReason(finishReason: unknown): string | null {
  if (finishReason === 'length') return 'max_output_tokens'
  if (finishReason === 'content_filter') return 'content_filter'
  return null
}

const base = (shape: ResponseShape) => shape.id.slice(5)

export const itemIds = {
  message: (shape: ResponseShape) => `msg_${base(shape)}`,
  reasoning: (shape: ResponseShape) => `rs_${base(shape)}`,
  functionCall: (shape: ResponseShape, index: number) => `fc_${base(shape)}_${index}`,
}

export function messageItem(shape: ResponseShape, text: string, status: ItemStatus): OutputItem {
  return {
    id: itemIds.message(shape),
    type: 'message',
    status,
    role: 'assistant',
    content: status === 'in_progress' && text === '' ? [] : [{ type: 'output_text', text, annotations: [] }],
  }
}

/** A message the model refused to give: its one content part the refusal, as OpenAI's are. */
export function refusalItem(
  shape: ResponseShape,
  refusal: string,
  status: ItemStatus,
  id?: string,
): OutputItem {
  return {
    ...messageItem(shape, '', status),
    ...(id ? { id } : {}),
    content: status === 'in_progress' && refusal === '' ? [] : [{ type: 'refusal', refusal }],
  }
}

/**
 * A reasoning item. The supplier's reasoning text is its `reasoning_text` content; when the
 * request asked for a summary, the same text is its summary (suppliers give no shorter one).
 */
export function reasoningItem(shape: ResponseShape, text: string, status: ItemStatus): OutputItem {
  const open = status === 'in_progress' && text === ''
  if (shape.reasoning.summary !== null) {
    return {
      id: itemIds.reasoning(shape),
      type: 'reasoning',
      status,
      summary: open ? [] : [{ type: 'summary_text', text }],
    }
  }
  return {
    id: itemIds.reasoning(shape),
    type: 'reasoning',
    status,
    summary: [],
    content: open ? [] : [{ type: 'reasoning_text', text }],
  }
}

export function functionCallItem(
  shape: ResponseShape,
  index: number,
  call: { callId: string; name: string; arguments: string },
  status: ItemStatus,
): OutputItem {
  return {
    id: itemIds.functionCall(shape, index),
    type: 'function_call',
    status,
    call_id: call.callId,
    name: call.name,
    arguments: call.arguments,
  }
}

interface ChatMessage {
  content?: unknown
  refusal?: unknown
  reasoning_content?: unknown
  reasoning?: unknown
  tool_calls?: { id?: unknown; function?: { name?: unknown; arguments?: unknown } }[]
}

/** The reasoning text a supplier sent, under either name suppliers use for it. */
export function reasoningText(message: { reasoning_content?: unknown; reasoning?: unknown }): string {
  if (typeof message.reasoning_content === 'string') return message.reasoning_content
  return typeof message.reasoning === 'string' ? message.reasoning : ''
}

/** The output items of a buffered chat answer: reasoning, then the message, then the calls. */
export function outputItems(
  shape: ResponseShape,
  chat: Record<string, unknown>,
  status: ItemStatus,
): OutputItem[] {
  const choice = (chat.choices as { message?: ChatMessage }[] | undefined)?.[0]
  const message = choice?.message ?? {}
  const items: OutputItem[] = []
  // Content may come as parts (Mistral's): their thinking is reasoning too.
  const { text, thinking } = contentText(message.content)
  const reasoning = reasoningText(message) + thinking
  if (reasoning) items.push(reasoningItem(shape, reasoning, status))
  // A call that is not an object is no call (a supplier's null).
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls.filter((call) => isRecord(call)) : []
  if (typeof message.refusal === 'string' && message.refusal) {
    items.push(refusalItem(shape, message.refusal, status))
  } else if (text || calls.length === 0) {
    items.push(messageItem(shape, text, status))
  }
  const callIds = ownCallIds(
    calls.map((call) => call.id),
    (i) => `call_${base(shape)}_${i}`,
  )
  calls.forEach((call, i) => {
    items.push(
      functionCallItem(
        shape,
        i,
        {
          callId: callIds[i]!,
          name: typeof call.function?.name === 'string' ? call.function.name : '',
          // As a stream gives them: a whole object ends them.
          arguments:
            typeof call.function?.arguments === 'string' ? argumentsText(call.function.arguments) : '',
        },
        status,
      ),
    )
  })
  return status === 'incomplete' ? items.map((item, i) => ({ ...item, status: ended(items, i) })) : items
}

/**
 * An item's own status in an answer cut short, as the stream gives it: one that something came
 * after was whole (text, or a call whose arguments are a whole JSON object); the last was cut.
 */
function ended(items: OutputItem[], index: number): ItemStatus {
  const item = items[index]!
  if (index === items.length - 1) return 'incomplete'
  if (item.type !== 'function_call') return 'completed'
  const json = new JsonPrefix()
  json.feed(item.arguments as string)
  return json.whole ? 'completed' : 'incomplete'
}

/** A `response` object in OpenAI's shape. */
export function responseObject(
  shape: ResponseShape,
  status: ResponseStatus,
  output: OutputItem[],
  usage: ResponsesUsage | null,
  incomplete: string | null = null,
) {
  const response: Record<string, unknown> = {
    id: shape.id,
    object: 'response',
    created_at: shape.createdAt,
    status,
    error: null,
    incomplete_details: incomplete ? { reason: incomplete } : null,
    instructions: shape.instructions,
    max_output_tokens: shape.maxOutputTokens,
    metadata: shape.metadata,
    model: shape.model,
    output,
    parallel_tool_calls: shape.parallelToolCalls,
    previous_response_id: null,
    reasoning: shape.reasoning,
    store: false,
    temperature: shape.temperature,
    top_p: shape.topP,
    text: shape.text,
    tool_choice: shape.toolChoice,
    tools: shape.tools,
    truncation: 'disabled',
    user: shape.user,
  }
  if (usage) {
    response.usage = {
      input_tokens: usage.input_tokens,
      input_tokens_details: { cached_tokens: usage.cached_tokens },
      output_tokens: usage.output_tokens,
      output_tokens_details: { reasoning_tokens: usage.reasoning_tokens },
      total_tokens: usage.input_tokens + usage.output_tokens,
    }
  }
  return response
}
