// What the simulated supplier bills a chat request: the prompt split as its cache saw it, and the
// debit by the upstream's published billing rules.
import type { TextPrices } from '../catalog/entry.ts'
import { mapUpstreamModel } from '../catalog/venice-mapping.ts'
import { burnOf } from '../inference/meter.ts'
import { promptTokens } from './generate.ts'
import type { VeniceModel } from './models.ts'
import type { SimSettings } from './server.ts'

/** The prompt as the upstream bills it: all its tokens, of which some read or written to the cache. */
export interface SimPrompt {
  tokens: number
  cached: number
  written: number
}

// The models are constants: each one's prices are read once, not on every request.
const prices = new Map<VeniceModel, TextPrices | undefined>()

function pricesOf(model: VeniceModel): TextPrices | undefined {
  if (!prices.has(model)) prices.set(model, mapUpstreamModel(model)?.prices as TextPrices | undefined)
  return prices.get(model)
}

/**
 * What the upstream debits for a request: its published prices by its billing rules (cache reads
 * and writes at their prices, the long-prompt tier past its threshold), computed the one way the
 * project computes that bill.
 */
export function listPriceBurn(model: VeniceModel, prompt: SimPrompt, completion: number): number {
  const prices = pricesOf(model)
  if (!prices) return 0
  return burnOf(
    {
      promptTokens: prompt.tokens,
      completionTokens: completion,
      cachedTokens: prompt.cached,
      cacheWriteTokens: prompt.written,
    },
    prices,
  )
}

/** The prompt's split: the settings' counts when set, else the conversation so far on a cache-priced model. */
export function simPrompt(
  model: VeniceModel,
  messages: { content?: unknown }[],
  settings: Pick<SimSettings, 'cachedTokens' | 'cacheWriteTokens'>,
): SimPrompt {
  const tokens = promptTokens(messages)
  const cachePriced = model.model_spec.pricing?.cache_input !== undefined
  const conversation = cachePriced && messages.length > 1 ? promptTokens(messages.slice(0, -1)) : 0
  const written = Math.min(settings.cacheWriteTokens ?? 0, tokens)
  const cached = Math.min(settings.cachedTokens ?? conversation, tokens - written)
  return { tokens, cached, written }
}
