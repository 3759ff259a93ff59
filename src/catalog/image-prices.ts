// An image model's prices by tier, as the upstream's `/models` publishes them: `pricing.resolutions`
// (per image by resolution tier) and `pricing.quality` (per image by resolution, then quality; the
// bill of every request to a model that takes `quality`), with the quality a request naming none is
// billed at read from `constraints.quality.default`. Every tier must be a readable positive price:
// one that is not leaves the model not live, since a request landing on it could not be billed what
// the upstream bills.
import { formatMicros } from '../money/units.ts'
import type { ImageTiers, ModelPrices, PricingValue } from './entry.ts'
import { isRecord, price } from './list-price.ts'

/** A tier's name as requests send it (`1K`, `high`): a short plain word. */
const TIER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$/

/** Tier name -> micro-DIEM; null when the table is empty or a tier is unnamed, unreadable or free. */
function priceTable(value: unknown): Record<string, number> | null {
  if (!isRecord(value)) return null
  const tiers: [string, number][] = []
  for (const [name, pair] of Object.entries(value)) {
    const micros = price(pair)
    if (!TIER_NAME.test(name) || micros === undefined || micros === 0) return null
    tiers.push([name, micros])
  }
  // Built by fromEntries: a tier named like an object's own field stays a field, never a prototype.
  return tiers.length > 0 ? Object.fromEntries(tiers) : null
}

/** Resolution -> quality -> micro-DIEM; null when any row is not a readable price table. */
function qualityMatrix(value: unknown): Record<string, Record<string, number>> | null {
  if (!isRecord(value)) return null
  const rows: [string, Record<string, number>][] = []
  for (const [resolution, row] of Object.entries(value)) {
    const table = priceTable(row)
    if (!TIER_NAME.test(resolution) || !table) return null
    rows.push([resolution, table])
  }
  return rows.length > 0 ? Object.fromEntries(rows) : null
}

/** The default quality the model publishes; anything else is none (a request must name its own). */
function defaultQuality(constraints: unknown): string | undefined {
  const quality = isRecord(constraints) ? constraints.quality : undefined
  const value = isRecord(quality) ? quality.default : undefined
  return typeof value === 'string' && TIER_NAME.test(value) ? value : undefined
}

const shown = (table: Record<string, number>): Record<string, string> =>
  Object.fromEntries(Object.entries(table).map(([name, micros]) => [name, formatMicros(micros)]))

/**
 * The tiers an image model publishes, as billing reads them and as its row shows them: undefined
 * when it publishes none (it is priced per image by `generation`), null when they cannot be read.
 */
export function tieredImagePrice(
  pricing: Record<string, unknown> | undefined,
  constraints: unknown,
): { prices: ModelPrices; pricing: Record<string, PricingValue> } | null | undefined {
  const byResolution = pricing?.resolutions
  const byQuality = pricing?.quality
  if (byResolution == null && byQuality == null) return undefined
  const tiers: ImageTiers = {}
  const row: Record<string, PricingValue> = { currency: 'USD', unit: 'image' }
  if (byResolution != null) {
    const table = priceTable(byResolution)
    if (!table) return null
    tiers.resolutions = table
    row.resolutions = shown(table)
  }
  if (byQuality != null) {
    const matrix = qualityMatrix(byQuality)
    if (!matrix) return null
    tiers.quality = matrix
    row.quality = Object.fromEntries(Object.entries(matrix).map(([res, table]) => [res, shown(table)]))
    const fallback = defaultQuality(constraints)
    if (fallback !== undefined) {
      tiers.defaultQuality = fallback
      row.default_quality = fallback
    }
  }
  return { prices: { imageTiers: tiers }, pricing: row }
}
