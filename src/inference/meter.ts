// Meter: usage -> burn, at the catalog's published per-million-token prices (USD = DIEM).
import type { ModelPrices } from '../catalog/entry.ts'
import type { MicroDiem } from '../money/units.ts'
import { tokenBurn } from '../money/units.ts'

export interface Usage {
  promptTokens: number
  completionTokens: number
}

export function burnOf(usage: Usage, prices: ModelPrices): MicroDiem {
  return (tokenBurn(usage.promptTokens, prices.inputPerMillion ?? 0) +
    tokenBurn(usage.completionTokens, prices.outputPerMillion ?? 0)) as MicroDiem
}

/** Usage as an OpenAI-style body reports it, or null when it is missing or malformed. */
export function readUsage(raw: unknown): Usage | null {
  if (!raw || typeof raw !== 'object') return null
  const { prompt_tokens: prompt, completion_tokens: completion } = raw as Record<string, unknown>
  const ok = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0
  return ok(prompt) && ok(completion) ? { promptTokens: prompt, completionTokens: completion } : null
}
