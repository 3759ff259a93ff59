// Buffered chat: the supplier's JSON, cleared, with our ids and the cost headers.

import type { Clearing } from '../market/clearing.ts'
import { formatMicros } from '../money/units.ts'
import type { ValidChat } from './chat-request.ts'
import { type ClearDeps, type ClearedUsage, clearUsage } from './clear-usage.ts'
import type { Dispatched } from './dispatch.ts'
import { readCost, readPromptUsage, readUsage } from './meter.ts'
import { type ChatMessageLike, OutputTokenCounter, promptFieldsOf } from './tokens.ts'
import { type Generated, generatedText } from './upstream-events.ts'

export interface BufferedResult {
  body: Record<string, unknown>
  clearing: ClearedUsage
}

/**
 * What a buffered answer generated across its choices: text, reasoning and tool calls, as a
 * stream's deltas are counted.
 */
export function answerText(json: Record<string, unknown>): string {
  if (!Array.isArray(json.choices)) return ''
  let text = ''
  for (const choice of json.choices as ({ message?: Generated } | null)[])
    text += generatedText(choice?.message)
  return text
}

/** Output tokens of a buffered answer that came without usage, by the tokenizer (`count`). */
function generatedTokens(
  json: Record<string, unknown>,
  limit: number,
  count: (text: string) => Promise<number>,
) {
  const counter = new OutputTokenCounter(limit)
  counter.add(answerText(json))
  return counter.total(count)
}

export async function relayBuffered(
  deps: ClearDeps,
  chat: ValidChat,
  messages: ChatMessageLike[],
  dispatched: Dispatched,
  requestId: string,
): Promise<BufferedResult> {
  const json = dispatched.json!
  const reported = readUsage(json.usage)
  const clearing = clearUsage(deps, {
    chat,
    messages,
    promptFields: promptFieldsOf(chat.upstreamBody),
    admission: dispatched.admission,
    preBalance: dispatched.preBalance,
    reported,
    partial: reported ? null : readPromptUsage(json.usage),
    upstreamCost: readCost(json.cost),
    generatedTokens: (count) => generatedTokens(json, chat.maxTokens * chat.choices, count),
    outcome: 'completed',
  })
  // Rewritten while the clear is in Redis. The supplier's own cost figure is its list price, not
  // what the buyer pays: it is compared with the burn above and stays upstream (an undefined field
  // is not serialised). The answer is the supplier's object, rewritten in place rather than copied.
  if (json.cost !== undefined) json.cost = undefined
  json.id = `chatcmpl-${requestId.slice(4)}`
  json.model = chat.model.id
  return { body: json, clearing: await clearing }
}

export function costHeaders(clearing: Clearing): Record<string, string> {
  return {
    'x-svc-cost-usdc': formatMicros(clearing.charged),
    'x-svc-clearing-price-cents': String(clearing.askCents),
    'x-balance-remaining': formatMicros(clearing.confirmedAfter),
  }
}
