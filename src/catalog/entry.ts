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
  /** List prices in USD (= DIEM), 6-decimal strings; informational: the buyer pays burn x ask. */
  pricing?: Record<string, string>
  context_length?: number
  max_completion_tokens?: number
}

/** Integer list prices, micro-DIEM: per million tokens for text, per unit for image and video. */
export interface ModelPrices {
  inputPerMillion?: number
  outputPerMillion?: number
  perImage?: number
  perSecond?: number
}

export interface CatalogEntry {
  row: CatalogRow
  prices: ModelPrices | null
}

export const MODEL_PREFIX = 'svc/'

/** Model ids may be sent bare or as `svc/<id>`; both resolve to the same row. */
export function bareModelId(id: string): string {
  return id.startsWith(MODEL_PREFIX) ? id.slice(MODEL_PREFIX.length) : id
}
