// Meter: usage -> burn, at the catalog's published per-million-token prices (USD = DIEM), by the
// upstream's own bill: uncached prompt tokens at input, cache reads at cache_input, cache writes at
// cache_write, completion at output, all at the extended tier once the prompt passes its threshold.
import type { ExtendedRates, TextPrices, TokenRates } from '../catalog/entry.ts'
import type { MicroDiem } from '../money/units.ts'
import { billBurn, parseMicros } from '../money/units.ts'

export interface Usage {
  /** Every prompt token, the cached and cache-written ones included. */
  promptTokens: number
  completionTokens: number
  /** Prompt tokens read from the upstream's cache (absent: none). */
  cachedTokens?: number
  /** Prompt tokens written to the upstream's cache (absent: none). */
  cacheWriteTokens?: number
}

/** The tier a prompt of this size is billed at: extended past its threshold, else the base prices. */
function tierOf(promptTokens: number, prices: TextPrices): TokenRates {
  const extended = prices.extended
  return extended && promptTokens > extended.contextTokenThreshold ? extended : prices
}

/** The three prompt prices of a tier; one the model does not publish is its input price. */
function promptRates(rates: TokenRates): { input: number; cacheInput: number; cacheWrite: number } {
  return {
    input: rates.inputPerMillion,
    cacheInput: rates.cacheInputPerMillion ?? rates.inputPerMillion,
    cacheWrite: rates.cacheWritePerMillion ?? rates.inputPerMillion,
  }
}

/**
 * Burn of one request: every term of the upstream's bill (uncached prompt, cache reads, cache
 * writes, completion) priced exactly and the whole sum rounded up once, as the upstream charges it.
 */
export function burnOf(usage: Usage, prices: TextPrices): MicroDiem {
  const rates = tierOf(usage.promptTokens, prices)
  const cached = usage.cachedTokens ?? 0
  const written = usage.cacheWriteTokens ?? 0
  const { input, cacheInput, cacheWrite } = promptRates(rates)
  return billBurn([
    [usage.promptTokens - cached - written, input],
    [cached, cacheInput],
    [written, cacheWrite],
    [usage.completionTokens, rates.outputPerMillion],
  ])
}

/** The tiers a prompt of at most `promptBound` tokens can be billed at. */
export function reachableTiers(promptBound: number, prices: TextPrices): TokenRates[] {
  const extended: ExtendedRates | undefined = prices.extended
  return extended && promptBound > extended.contextTokenThreshold ? [prices, extended] : [prices]
}

/**
 * The most one prompt token can be billed at in a tier, however the upstream splits the prompt
 * between uncached, cache reads and cache writes: the dearest of the three prices.
 */
export function dearestPromptPrice(rates: TokenRates): number {
  const prompt = promptRates(rates)
  return Math.max(prompt.input, prompt.cacheInput, prompt.cacheWrite)
}

/**
 * The worst case a request can burn: its prompt bound at the dearest prompt price and its
 * completion limit, one sum rounded up, at the dearest reachable tier. No bill within the bounds
 * has a larger sum, so none rounds to more.
 */
export function worstBurn(promptBound: number, completionTokens: number, prices: TextPrices): MicroDiem {
  let worst = 0
  for (const rates of reachableTiers(promptBound, prices)) {
    const burn = billBurn([
      [promptBound, dearestPromptPrice(rates)],
      [completionTokens, rates.outputPerMillion],
    ])
    if (burn > worst) worst = burn
  }
  return worst as MicroDiem
}

const count = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0

/**
 * Usage as an OpenAI-style body reports it, or null when it is missing or malformed. Cache counts
 * are read from `prompt_tokens_details` (or the usage itself); counts that do not fit inside
 * `prompt_tokens` say nothing true about the prompt, so they are dropped and the whole prompt is
 * billed at input: a bill the upstream's formula gives for some honest report, and one the hold
 * covers.
 */
export function readUsage(raw: unknown): Usage | null {
  const prompt = readPromptUsage(raw)
  const completion = prompt && (raw as Record<string, unknown>).completion_tokens
  return prompt && count(completion) ? { ...prompt, completionTokens: completion } : null
}

/**
 * The prompt side of a usage report (its completion count left at 0), even where the completion
 * count is missing or malformed: the prompt the upstream bills is the one it counted.
 */
export function readPromptUsage(raw: unknown): Usage | null {
  if (!raw || typeof raw !== 'object') return null
  const body = raw as Record<string, unknown>
  const prompt = body.prompt_tokens
  if (!count(prompt)) return null
  const usage: Usage = { promptTokens: prompt, completionTokens: 0 }
  const details = (body.prompt_tokens_details ?? {}) as Record<string, unknown>
  const cached = details.cached_tokens
  const written = details.cache_creation_input_tokens ?? body.cache_creation_input_tokens
  const cachedTokens = count(cached) ? cached : 0
  const cacheWriteTokens = count(written) ? written : 0
  if (cachedTokens + cacheWriteTokens > prompt) return usage
  if (cachedTokens > 0) usage.cachedTokens = cachedTokens
  if (cacheWriteTokens > 0) usage.cacheWriteTokens = cacheWriteTokens
  return usage
}

/**
 * A reported prompt no larger than `bound`, the request's true upper bound of its prompt (tokens.ts
 * promptTokenBound): a count past it cannot be true, so it is billed at the bound, all at input.
 */
export function boundedPrompt(reported: Usage, bound: number): Usage {
  if (reported.promptTokens <= bound) return reported
  return { promptTokens: bound, completionTokens: reported.completionTokens }
}

/**
 * A complete report as far as the request allows it: its prompt by `promptBound` (boundedPrompt),
 * its completion by `completionLimit`, the max_tokens x n the supplier was sent (hidden reasoning
 * counts inside that limit). The report itself when it is within both.
 */
export function boundedUsage(reported: Usage, promptBound: number, completionLimit: number): Usage {
  const usage = boundedPrompt(reported, promptBound)
  if (reported.completionTokens <= completionLimit) return usage
  return { ...usage, completionTokens: completionLimit }
}

/**
 * The upstream's own cost of a request (`cost.diem`, else `cost.usd`) in micro-DIEM, or null when
 * there is none or it is unreadable. A number is rounded to the micro, as the wire shows prices.
 */
export function readCost(raw: unknown): MicroDiem | null {
  if (!raw || typeof raw !== 'object') return null
  const { diem, usd } = raw as Record<string, unknown>
  const value = diem ?? usd
  const text = typeof value === 'number' && Number.isFinite(value) ? value.toFixed(6) : value
  const micros = typeof text === 'string' ? parseMicros(text) : null
  return micros !== null && micros >= 0 ? (micros as MicroDiem) : null
}

/**
 * The upstream's figure reaches us rounded to the micro its own way (up, down or to nearest, once
 * or term by term over the at most four terms): it differs from the burn by no more than this
 * without disagreeing.
 */
const ROUNDING_SLACK = 4

/** True when the upstream's cost and the metered burn differ by more than rounding. */
export function costDisagrees(burn: MicroDiem, upstreamCost: MicroDiem): boolean {
  return Math.abs(burn - upstreamCost) > ROUNDING_SLACK
}
