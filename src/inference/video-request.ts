// A video request, validated and admitted: a live video model, its duration, the worst-case burn
// (the catalog's per-second price x seconds) and the body the supplier's queue receives.
import { t } from 'elysia'
import type { CatalogEntry } from '../catalog/entry.ts'
import { badRequest } from '../errors.ts'
import type { MicroDiem } from '../money/units.ts'
import { callableModel } from './callable-model.ts'

const MAX_SECONDS = 60

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
  const { row, prices } = callableModel(entry, body.model, 'video', ['perSecond'])
  const seconds = typeof body.duration === 'number' ? body.duration : Number(body.duration.slice(0, -1))
  // The upstream's constraint, read only when it is a list: a lying shape is not the buyer's 500.
  const durations = row.constraints?.durations
  const allowed = Array.isArray(durations) ? durations.map((d) => Number.parseInt(String(d), 10)) : undefined
  if (seconds < 1 || seconds > MAX_SECONDS || (allowed && !allowed.includes(seconds))) {
    throw badRequest(
      `duration must be one of ${allowed ? allowed.map((d) => `${d}s`).join(', ') : `1s to ${MAX_SECONDS}s`} for ${row.id}`,
      'invalid_duration',
    )
  }
  return {
    modelId: row.id,
    seconds,
    holdDiem: (prices.perSecond * seconds) as MicroDiem,
    upstreamBody: { ...body, model: row.id, duration: `${seconds}s` },
  }
}
