// Upstream (Venice-shaped) `/models` -> catalog entries. Priced and capped models are `live`, the
// others `coming_soon`; offline, disabled, unknown-type and `svc/`-prefixed models are left off. A
// video model is listed with no price (`/models` publishes none): the sync asks the upstream's
// quote endpoint for its prices (video-prices.ts), and only then is it live.
import { formatMicros } from '../money/units.ts'
import {
  bareModelId,
  type CatalogEntry,
  type CatalogRow,
  MODEL_PREFIX,
  type Modality,
  type ModelPrices,
  type TokenRates,
} from './entry.ts'
import { tieredImagePrice } from './image-prices.ts'
import { isRecord, price } from './list-price.ts'

/** A `pricing` block: prices by name, and the `extended` block beside them. */
type Pricing = { [name: string]: unknown }

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
    pricing?: Pricing
  }
}

const MODALITIES: readonly Modality[] = ['text', 'image', 'video']

function positiveInt(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : undefined
}

/** A price that is published but unreadable: the model cannot be billed exactly, so it is not live. */
const UNREADABLE = Symbol('unreadable')

function optionalPrice(value: unknown): number | undefined | typeof UNREADABLE {
  if (value === undefined || value === null) return undefined
  return price(value) ?? UNREADABLE
}

/** One tier's rates from a pricing block (the model's own, or its `extended` block). */
function tokenRates(pricing: Pricing | undefined): TokenRates | null {
  const input = price(pricing?.input)
  const output = price(pricing?.output)
  const cacheInput = optionalPrice(pricing?.cache_input)
  const cacheWrite = optionalPrice(pricing?.cache_write)
  if (input === undefined || output === undefined) return null
  if (cacheInput === UNREADABLE || cacheWrite === UNREADABLE) return null
  const rates: TokenRates = { inputPerMillion: input, outputPerMillion: output }
  if (cacheInput !== undefined) rates.cacheInputPerMillion = cacheInput
  if (cacheWrite !== undefined) rates.cacheWritePerMillion = cacheWrite
  return rates
}

/**
 * A list that prices a model at nothing bills its buyers nothing, while the upstream may still bill
 * the supplier's key for it (a list that lies or lags): such a model is not live. Nobody earns from
 * a free model either, so nothing is lost by it.
 */
function unpricedRates(rates: TokenRates): boolean {
  return rates.inputPerMillion === 0 && rates.outputPerMillion === 0
}

/** A tier's rates as the catalog row shows them: 6-decimal strings under the upstream's names. */
function ratesRow(rates: TokenRates): Record<string, string> {
  const row: Record<string, string> = {
    input: formatMicros(rates.inputPerMillion),
    output: formatMicros(rates.outputPerMillion),
  }
  if (rates.cacheInputPerMillion !== undefined) row.cache_input = formatMicros(rates.cacheInputPerMillion)
  if (rates.cacheWritePerMillion !== undefined) row.cache_write = formatMicros(rates.cacheWritePerMillion)
  return row
}

function textPrices(model: UpstreamModel): { prices: ModelPrices; pricing: CatalogRow['pricing'] } | null {
  const spec = model.model_spec
  const base = tokenRates(spec?.pricing)
  const capped = positiveInt(spec?.availableContextTokens) && positiveInt(spec?.maxCompletionTokens)
  if (!base || !capped || unpricedRates(base)) return null
  const prices: ModelPrices = { ...base }
  const pricing: NonNullable<CatalogRow['pricing']> = {
    currency: 'USD',
    unit: 'million_tokens',
    ...ratesRow(base),
  }
  const published = spec?.pricing?.extended
  if (published !== undefined && published !== null) {
    // Unreadable long-prompt prices would bill long prompts below the upstream's bill: not live.
    const block = isRecord(published) ? published : undefined
    const threshold = positiveInt(block?.context_token_threshold)
    const rates = tokenRates(block)
    // Long prompts priced at nothing would be billed nothing while the key is billed: not live.
    if (!rates || threshold === undefined || unpricedRates(rates)) return null
    prices.extended = { contextTokenThreshold: threshold, ...rates }
    pricing.extended = { context_token_threshold: threshold, ...ratesRow(rates) }
  }
  return { prices, pricing }
}

function unitPrice(model: UpstreamModel, field: string) {
  const value = price(model.model_spec?.pricing?.[field])
  if (value === undefined || value === 0) return null
  const prices: ModelPrices = { perImage: value }
  return { prices, pricing: { currency: 'USD', unit: 'image', generation: formatMicros(value) } }
}

/**
 * An image model priced by tiers (`resolutions`, or a `quality` matrix) is billed by the upstream
 * at the tier a request names: the catalog keeps the tiers (image-prices.ts), and one it cannot
 * read keeps the model `coming_soon`. Otherwise its price is the flat `generation` per image.
 */
function imagePrice(model: UpstreamModel) {
  const tiered = tieredImagePrice(model.model_spec?.pricing, model.model_spec?.constraints)
  return tiered === undefined ? unitPrice(model, 'generation') : tiered
}

export function mapUpstreamModel(model: UpstreamModel): CatalogEntry | null {
  if (typeof model.id !== 'string' || model.id === '' || !isRecord(model.model_spec)) return null
  // Buyers' `svc/x` is x: an upstream id so spelled could be neither fetched nor called by it.
  if (model.id.startsWith(MODEL_PREFIX)) return null
  const modality = model.type as Modality
  if (!MODALITIES.includes(modality)) return null
  const spec = model.model_spec
  if (spec.offline === true) return null

  const priced = modality === 'text' ? textPrices(model) : modality === 'image' ? imagePrice(model) : null

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
  // A video model awaits the prices its quotes give it (an empty table), `coming_soon` until then.
  return { row, prices: priced ? priced.prices : modality === 'video' ? { perVideo: {} } : null }
}

/**
 * The most models a list may have (the upstream lists a few hundred): the whole catalog is written
 * by one script that blocks Redis, and re-read by every replica each time its cache expires.
 */
export const MAX_MODELS = 10_000

/** A row kept on the list but not billable: its prices cannot be known. */
function unpriced(entry: CatalogEntry): CatalogEntry {
  const { pricing: _, ...row } = entry.row
  return { row: { ...row, status: 'coming_soon' }, prices: null }
}

/** An id as an upstream may match it: ids that differ only in case or surrounding space may be one model. */
const foldedId = (id: string) => id.trim().toLowerCase()

/** What billing reads of an entry: ids folded together that differ in it bill at an unknown price. */
function billingOf(entry: CatalogEntry | null): string {
  if (!entry) return 'null'
  const { modality, context_length, max_completion_tokens, constraints, capabilities } = entry.row
  // A video model's prices are quoted for the durations, resolutions and audio it lists.
  const quoted = modality === 'video' ? [constraints ?? null, capabilities.supportsAudio ?? null] : null
  return JSON.stringify([
    entry.prices,
    modality,
    context_length ?? null,
    max_completion_tokens ?? null,
    quoted,
  ])
}

/** The folded ids whose spellings on the list bill differently. */
function foldConflicts(byId: Map<string, { entry: CatalogEntry | null }>): Set<string> {
  const billing = new Map<string, string>()
  const conflicts = new Set<string>()
  for (const [id, { entry }] of byId) {
    const folded = foldedId(id)
    const seen = billing.get(folded)
    if (seen === undefined) billing.set(folded, billingOf(entry))
    else if (seen !== billingOf(entry)) conflicts.add(folded)
  }
  return conflicts
}

/**
 * Maps a whole `/models` answer; throws when it is not a model list at all, or lists no model it
 * can read (an upstream that answers so is failing: the catalog there is kept). An id listed more
 * than once with different rows (prices, caps, offline) has no price the upstream is known to
 * bill: it is listed once, `coming_soon`. So are ids spelled apart only by case or surrounding space
 * whose prices or caps differ: the upstream may bill a call to one at the other's price.
 */
export function mapUpstreamModels(
  body: unknown,
  disabled: readonly string[] = [],
  /** Told the disabled ids that name no model on the list, in any spelling. */
  unmatched?: (ids: string[]) => void,
): CatalogEntry[] {
  if (!isRecord(body) || !Array.isArray(body.data)) throw new Error('upstream /models is not a model list')
  if (body.data.length === 0) throw new Error('upstream /models listed no models')
  if (body.data.length > MAX_MODELS) throw new Error(`upstream /models listed over ${MAX_MODELS} models`)
  const byId = new Map<string, { entry: CatalogEntry | null; json: string; conflict: boolean }>()
  let readable = false
  for (const model of body.data) {
    if (!isRecord(model) || typeof model.id !== 'string') continue
    const entry = mapUpstreamModel(model as UpstreamModel)
    // A model the upstream says is offline was read: a list of only those is its answer, not a failure.
    readable ||= entry !== null || (isRecord(model.model_spec) && model.model_spec.offline === true)
    const json = JSON.stringify(entry)
    const seen = byId.get(model.id)
    if (!seen) byId.set(model.id, { entry, json, conflict: false })
    else if (seen.json !== json) {
      seen.conflict = true
      seen.entry ??= entry
    }
  }
  // Models listed but none readable (a changed schema): failing as surely as an empty list.
  if (!readable) throw new Error('upstream /models listed no readable model')
  // Disabled by either name a buyer may use (bare or `svc/` prefixed), in every spelling the
  // upstream may take for the same model: folded as the conflicts below are.
  const off = new Map(disabled.map((id) => [foldedId(bareModelId(id.trim())), id]))
  const folds = foldConflicts(byId)
  const entries: CatalogEntry[] = []
  for (const [id, { entry, conflict }] of byId) {
    if (!entry || off.has(foldedId(id))) continue
    entries.push(conflict || folds.has(foldedId(id)) ? unpriced(entry) : entry)
  }
  if (unmatched && off.size > 0) {
    const listed = new Set([...byId.keys()].map(foldedId))
    const none = [...off].filter(([folded]) => !listed.has(folded)).map(([, id]) => id)
    if (none.length > 0) unmatched(none)
  }
  return entries.sort((a, b) => a.row.id.localeCompare(b.row.id))
}
