// What the catalog holds per model: the public row of the contract, and the integer prices and
// caps that billing reads (never floats on a money path).

export type Modality = 'text' | 'image' | 'video'
export type ModelStatus = 'live' | 'coming_soon'

/** A catalog row's price field: an amount, a name, or a table of them (an image model's tiers). */
export type PricingValue = string | number | { [name: string]: PricingValue }

/** The contract's catalog row, as `GET /v1/models` and `GET /v1/models/{id}` return it. */
export interface CatalogRow {
  id: string
  object: 'model'
  created: number
  owned_by: 'svc'
  name: string
  status: ModelStatus
  modality: Modality
  capabilities: Record<string, unknown>
  constraints?: Record<string, unknown>
  /**
   * List prices in USD (= DIEM), 6-decimal strings, with the long-prompt tier under `extended`
   * when the model has one, and an image model's `resolutions` / `quality` tiers; informational:
   * the buyer pays burn x ask.
   */
  pricing?: Record<string, PricingValue>
  context_length?: number
  max_completion_tokens?: number
}

/**
 * One tier of text prices, micro-DIEM per million tokens. A cache price the model does not publish
 * is billed at `inputPerMillion`, as the upstream bills it.
 */
export interface TokenRates {
  inputPerMillion: number
  outputPerMillion: number
  /** Prompt tokens read from the upstream's cache. */
  cacheInputPerMillion?: number
  /** Prompt tokens written to the upstream's cache. */
  cacheWritePerMillion?: number
}

/** The long-prompt tier: once a prompt passes the threshold, every token of the request is at it. */
export interface ExtendedRates extends TokenRates {
  contextTokenThreshold: number
}

/**
 * A video model's prices, micro-DIEM per job, as the upstream's quote endpoint answered them (its
 * `/models` lists none): by duration (`5s`), then by resolution, with `*` the most of any (audio on
 * or off, each resolution), which holds a job that names no resolution or one not quoted.
 */
export type VideoPrices = Record<string, Record<string, number>>

/**
 * An image model the upstream bills by the tier a request names, micro-DIEM per image: by
 * `resolution` (`1K` ...), or, where it publishes a `quality` matrix, by resolution then `quality`
 * (`low` ...). A request is billed at exactly one tier; one that names none is refused, never guessed.
 */
export interface ImageTiers {
  /** Per image by resolution: the bill of a model without a quality matrix. */
  resolutions?: Record<string, number>
  /** Per image by resolution, then quality: the bill of every request to a model that has it. */
  quality?: Record<string, Record<string, number>>
  /** The quality a request naming none is billed at, where the upstream publishes one. */
  defaultQuality?: string
}

/** Integer list prices, micro-DIEM: per million tokens for text, per image, per video job. */
export interface ModelPrices extends Partial<TokenRates> {
  extended?: ExtendedRates
  perImage?: number
  imageTiers?: ImageTiers
  /** Empty on a video model the sync has not priced (it is `coming_soon`). */
  perVideo?: VideoPrices
}

/** A text model's prices, as billing reads them. */
export type TextPrices = TokenRates & { extended?: ExtendedRates }

export interface CatalogEntry {
  row: CatalogRow
  prices: ModelPrices | null
}

export const MODEL_PREFIX = 'svc/'

/** Model ids may be sent bare or as `svc/<id>`; both resolve to the same row. */
export function bareModelId(id: string): string {
  return id.startsWith(MODEL_PREFIX) ? id.slice(MODEL_PREFIX.length) : id
}
