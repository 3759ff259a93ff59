// Upstream (Venice-shaped) `/models` -> catalog entries. Priced and capped models are `live`, the
// others `coming_soon`; offline, disabled and unknown-type models are left off the list.
import { formatMicros, parseMicros } from '../money/units.ts'
import type { CatalogEntry, CatalogRow, Modality, ModelPrices } from './entry.ts'

interface UpstreamPrice {
  usd?: unknown
  diem?: unknown
}

interface UpstreamModel {
  id?: unknown
  type?: unknown
  created?: unknown
  model_spec?: {
    name?: unknown
    availableContextTokens?: unknown
    maxCompletionTokens?: unknown
    offline?: unknown
    capabilities?: unknown
    constraints?: unknown
    pricing?: Record<string, UpstreamPrice | undefined>
  }
}

const MODALITIES: readonly Modality[] = ['text', 'image', 'video']

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function positiveInt(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : undefined
}

// DIEM is the unit billing counts in (1 DIEM = $1 of list price); usd is the fallback.
function price(p: UpstreamPrice | undefined): number | undefined {
  const raw = p?.diem ?? p?.usd
  if (typeof raw !== 'number' && typeof raw !== 'string') return undefined
  const micros = parseMicros(raw)
  return micros !== null && micros >= 0 ? micros : undefined
}

function textPrices(model: UpstreamModel): { prices: ModelPrices; pricing: Record<string, string> } | null {
  const spec = model.model_spec
  const input = price(spec?.pricing?.input)
  const output = price(spec?.pricing?.output)
  const capped = positiveInt(spec?.availableContextTokens) && positiveInt(spec?.maxCompletionTokens)
  if (input === undefined || output === undefined || !capped) return null
  return {
    prices: { inputPerMillion: input, outputPerMillion: output },
    pricing: {
      currency: 'USD',
      unit: 'million_tokens',
      input: formatMicros(input),
      output: formatMicros(output),
    },
  }
}

function unitPrice(model: UpstreamModel, field: string, unit: 'image' | 'second') {
  const value = price(model.model_spec?.pricing?.[field])
  if (value === undefined) return null
  const prices: ModelPrices = unit === 'image' ? { perImage: value } : { perSecond: value }
  return { prices, pricing: { currency: 'USD', unit, generation: formatMicros(value) } }
}

export function mapUpstreamModel(model: UpstreamModel): CatalogEntry | null {
  if (typeof model.id !== 'string' || model.id === '' || !isRecord(model.model_spec)) return null
  const modality = model.type as Modality
  if (!MODALITIES.includes(modality)) return null
  const spec = model.model_spec
  if (spec.offline === true) return null

  const priced =
    modality === 'text'
      ? textPrices(model)
      : modality === 'image'
        ? unitPrice(model, 'generation', 'image')
        : unitPrice(model, 'per_second', 'second')

  const row: CatalogRow = {
    id: model.id,
    object: 'model',
    created: positiveInt(model.created) ?? 0,
    owned_by: 'svc',
    name: typeof spec.name === 'string' ? spec.name : model.id,
    status: priced ? 'live' : 'coming_soon',
    modality,
    capabilities: isRecord(spec.capabilities) ? spec.capabilities : {},
  }
  if (isRecord(spec.constraints)) row.constraints = spec.constraints
  if (priced) row.pricing = priced.pricing
  const context = positiveInt(spec.availableContextTokens)
  const maxCompletion = positiveInt(spec.maxCompletionTokens)
  if (context) row.context_length = context
  if (maxCompletion) row.max_completion_tokens = maxCompletion
  return { row, prices: priced ? priced.prices : null }
}

/** Maps a whole `/models` answer; throws when it is not a model list at all. */
export function mapUpstreamModels(body: unknown, disabled: readonly string[] = []): CatalogEntry[] {
  if (!isRecord(body) || !Array.isArray(body.data)) throw new Error('upstream /models is not a model list')
  const entries: CatalogEntry[] = []
  for (const model of body.data) {
    if (!isRecord(model)) continue
    const entry = mapUpstreamModel(model as UpstreamModel)
    if (entry && !disabled.includes(entry.row.id)) entries.push(entry)
  }
  return entries.sort((a, b) => a.row.id.localeCompare(b.row.id))
}
