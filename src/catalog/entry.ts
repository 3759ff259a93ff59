// What the catalog holds per model: the public row of the contract, and the integer prices and
// caps that billing reads (never floats on a money path).

export type Modality = 'text' | 'image' | 'video'
export type ModelStatus = 'live' | 'coming_soon'

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
   * when the model has one; informational: the buyer pays burn x ask.
   */
  pricing?: Record<string, string | Record<string, string | number>>
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

/** Integer list prices, micro-DIEM: per million tokens for text, per image, per video job. */
export interface ModelPrices extends Partial<TokenRates> {
  extended?: ExtendedRates
  perImage?: number
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
