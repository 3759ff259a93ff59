// An image request, validated and admitted: a live image model, how many images, the worst-case
// burn (the catalog's per-image price x n) and the body the supplier receives.
import { t } from 'elysia'
import type { CatalogEntry } from '../catalog/entry.ts'
import type { MicroDiem } from '../money/units.ts'
import { callableModel } from './callable-model.ts'

export const MAX_IMAGES = 4

/** OpenAI's request shape; other fields (size, quality, style ...) pass through. */
export const imageBodySchema = t.Object(
  {
    model: t.String({ minLength: 1, maxLength: 256 }),
    prompt: t.String({ minLength: 1, maxLength: 32_000 }),
    n: t.Optional(t.Union([t.Number({ multipleOf: 1, minimum: 1, maximum: MAX_IMAGES }), t.Null()])),
    response_format: t.Optional(t.Union([t.Literal('b64_json'), t.Null()])),
  },
  { additionalProperties: true },
)

export type ImageBody = typeof imageBodySchema.static

export interface AdmittedImages {
  modelId: string
  count: number
  perImage: MicroDiem
  burnEstimate: MicroDiem
  upstreamBody: Record<string, unknown>
}

export function admitImages(body: ImageBody, entry: CatalogEntry | undefined): AdmittedImages {
  const { row, prices } = callableModel(entry, body.model, 'image', ['perImage'])
  const count = body.n ?? 1
  return {
    modelId: row.id,
    count,
    perImage: prices.perImage as MicroDiem,
    burnEstimate: (prices.perImage * count) as MicroDiem,
    upstreamBody: { ...body, model: row.id, n: count, response_format: 'b64_json' },
  }
}

/** The images a supplier answer delivered; null when the body is not an image answer. */
export function deliveredImages(json: Record<string, unknown>): number | null {
  return Array.isArray(json.data) ? json.data.length : null
}
