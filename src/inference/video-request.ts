// A video request, validated and admitted: a live video model, its duration, the hold (the
// catalog's quoted price of the job's duration at its resolution, or the most of any resolution when
// it names none; a resolution the catalog does not list is a 400) and the body the supplier's queue receives. The burn is the job's
// own quote, asked of the admitted key right before its queue (video-service.ts).
import { t } from 'elysia'
import type { CatalogEntry } from '../catalog/entry.ts'
import { ApiError, badRequest } from '../errors.ts'
import type { MicroDiem } from '../money/units.ts'
import { callableModel } from './callable-model.ts'

/** Venice's fields; others (resolution, aspect_ratio ...) pass through to the supplier. */
export const videoBodySchema = t.Object(
  {
    model: t.String({ minLength: 1, maxLength: 256 }),
    prompt: t.String({ minLength: 1, maxLength: 32_000 }),
    duration: t.Union([t.String({ pattern: '^[0-9]{1,3}s$' }), t.Number({ multipleOf: 1, minimum: 1 })]),
  },
  { additionalProperties: true },
)

export type VideoBody = typeof videoBodySchema.static

export interface ValidVideo {
  modelId: string
  seconds: number
  holdDiem: MicroDiem
  upstreamBody: Record<string, unknown>
}

export function validateVideo(body: VideoBody, entry: CatalogEntry | undefined): ValidVideo {
  const { row, prices } = callableModel(entry, body.model, 'video', ['perVideo'])
  const seconds = typeof body.duration === 'number' ? body.duration : Number(body.duration.slice(0, -1))
  const table = prices.perVideo
  const byResolution = Object.hasOwn(table, `${seconds}s`) ? table[`${seconds}s`] : undefined
  if (!byResolution) {
    throw badRequest(
      `duration must be one of ${Object.keys(table).join(', ')} for ${row.id}`,
      'invalid_duration',
    )
  }
  // A resolution the catalog has no quote for is refused here: its price is unknown, and a key's
  // quote above the hold would count against the supplier's offer.
  const resolution = (body as Record<string, unknown>).resolution
  const listed = Object.keys(byResolution).filter((r) => r !== '*')
  if (resolution !== undefined && !(typeof resolution === 'string' && listed.includes(resolution))) {
    const allowed = listed.length > 0 ? `one of ${listed.join(', ')}` : 'left out'
    throw new ApiError(400, 'invalid_resolution', `resolution must be ${allowed} for ${row.id}`, {
      extra: { param: 'resolution' },
    })
  }
  const hold = resolution === undefined ? byResolution['*'] : byResolution[resolution]
  if (!Number.isSafeInteger(hold) || hold! <= 0)
    throw badRequest(`model '${row.id}' is not live yet`, 'model_not_live')
  return {
    modelId: row.id,
    seconds,
    holdDiem: hold as MicroDiem,
    upstreamBody: { ...body, model: row.id, duration: `${seconds}s` },
  }
}
