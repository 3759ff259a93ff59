// Usage as a chat answer shows it (buffered body, stream's usage chunk): the counts billed, so a
// buyer's SDK reports the tokens its cost was computed from. A supplier's usage whose counts are
// the ones billed is shown as it came, the same object; one billed at what the request allows
// (clear-usage.ts billedUsage), or one without a completion count (billed on an estimate), is
// shown as a copy with the billed counts written over it.
import { isRecord } from './json-object.ts'
import type { Usage } from './meter.ts'

type Fields = Record<string, unknown>

const fieldsOf = (value: unknown): Fields | null => (isRecord(value) ? value : null)

/** A count as the meter reads it: absent is none; anything else is compared as it is. */
const shownCount = (value: unknown) => value ?? 0

/** True when every count the supplier's usage shows is the one billed. */
function showsBilled(raw: Fields, billed: Usage): boolean {
  const total = billed.promptTokens + billed.completionTokens
  const written = billed.cacheWriteTokens ?? 0
  const prompt = fieldsOf(raw.prompt_tokens_details)
  const reasoning = fieldsOf(raw.completion_tokens_details)?.reasoning_tokens
  return (
    raw.prompt_tokens === billed.promptTokens &&
    raw.completion_tokens === billed.completionTokens &&
    (raw.total_tokens === undefined || raw.total_tokens === total) &&
    shownCount(prompt?.cached_tokens) === (billed.cachedTokens ?? 0) &&
    shownCount(prompt?.cache_creation_input_tokens) === written &&
    shownCount(raw.cache_creation_input_tokens) === written &&
    !(typeof reasoning === 'number' && reasoning > billed.completionTokens)
  )
}

/**
 * The supplier's chat usage with the billed counts: itself when they are what it says (or when it
 * is no object: an answer without usage is sent without), else a copy with prompt, completion and
 * total tokens, the cache reads and writes (where it put them) as billed, and its reasoning tokens
 * no more than the completion billed.
 */
export function billedChatUsage(raw: unknown, billed: Usage): unknown {
  if (!isRecord(raw) || showsBilled(raw, billed)) return raw
  const written = billed.cacheWriteTokens ?? 0
  const shown: Fields = {
    ...raw,
    prompt_tokens: billed.promptTokens,
    completion_tokens: billed.completionTokens,
    total_tokens: billed.promptTokens + billed.completionTokens,
  }
  const prompt: Fields = { ...fieldsOf(raw.prompt_tokens_details), cached_tokens: billed.cachedTokens ?? 0 }
  if (prompt.cache_creation_input_tokens !== undefined) prompt.cache_creation_input_tokens = written
  shown.prompt_tokens_details = prompt
  if (raw.cache_creation_input_tokens !== undefined) shown.cache_creation_input_tokens = written
  const completion = fieldsOf(raw.completion_tokens_details)
  const reasoning = completion?.reasoning_tokens
  if (typeof reasoning === 'number' && reasoning > billed.completionTokens)
    shown.completion_tokens_details = { ...completion, reasoning_tokens: billed.completionTokens }
  return shown
}
