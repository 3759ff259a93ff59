// What the simulated supplier bills a chat request: the prompt split as its cache saw it, and the
// debit by the upstream's published billing rules.
import { promptTokens } from './generate.ts'
import type { ListPrice, VeniceModel } from './models.ts'
import type { SimSettings } from './server.ts'

/** The prompt as the upstream bills it: all its tokens, of which some read or written to the cache. */
export interface SimPrompt {
  tokens: number
  cached: number
  written: number
}

/** A list price per million tokens in micro-DIEM (the list has at most six decimals). */
const perMillion = (price: ListPrice) => Math.round(price.diem * 1_000_000)

/**
 * What the upstream debits for a request, from its own published list (written here apart from the
 * gateway's meter, so that the tests compare two readings of the rules, not one with itself): the
 * uncached prompt at `input`, cache reads at `cache_input`, cache writes at `cache_write` (either
 * missing: `input`), the completion at `output`, all at the `extended` tier once the prompt passes
 * its threshold. The bill is one sum, its micro-DIEM rounded up once.
 */
export function listPriceBurn(model: VeniceModel, prompt: SimPrompt, completion: number): number {
  const pricing = model.model_spec.pricing
  if (!pricing?.input || !pricing.output) return 0
  const extended = pricing.extended
  const tier = extended && prompt.tokens > extended.context_token_threshold ? extended : pricing
  const input = perMillion(tier.input!)
  const term = (tokens: number, price: number) => BigInt(tokens) * BigInt(price)
  const sum =
    term(prompt.tokens - prompt.cached - prompt.written, input) +
    term(prompt.cached, tier.cache_input ? perMillion(tier.cache_input) : input) +
    term(prompt.written, tier.cache_write ? perMillion(tier.cache_write) : input) +
    term(completion, perMillion(tier.output!))
  return Number((sum + 999_999n) / 1_000_000n)
}

/**
 * The upstream's own system prompt, added before the request's messages unless the request turns
 * it off (`venice_parameters.include_venice_system_prompt: false`): its tokens are billed too.
 */
export const UPSTREAM_SYSTEM_PROMPT =
  'You are a helpful assistant. Answer the question asked, in the language it was asked in, ' +
  'plainly and without refusing for reasons of taste. Keep to what is known; say so when unsure. '.repeat(3)

/** The messages the upstream reads: the request's, after its own system prompt unless turned off. */
export function withUpstreamPrompt(body: {
  messages?: unknown
  venice_parameters?: unknown
}): { content?: unknown }[] {
  const messages = (Array.isArray(body.messages) ? body.messages : []) as { content?: unknown }[]
  const venice = body.venice_parameters as { include_venice_system_prompt?: unknown } | undefined
  if (venice?.include_venice_system_prompt === false) return messages
  return [{ content: UPSTREAM_SYSTEM_PROMPT }, ...messages]
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
