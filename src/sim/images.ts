// The simulated supplier's image endpoints: OpenAI's `POST /images/generations` and Venice's native
// `POST /image/generate`, a small valid PNG per image. A flat-priced model is debited its list price
// per image on either. A model priced by tier is debited the tier a native request names (its
// `resolution`, and its `quality` or the model's default where the model publishes a quality
// matrix); on the OpenAI-compatible endpoint, which documents no `resolution` and ignores
// `quality`, it is debited its default tier whatever the request says, as the upstream may bill it.
import { formatMicros, parseMicros } from '../money/units.ts'
import { authenticate, intHeader, json, preflight, sleepUnlessAborted, veniceError } from './http.ts'
import type { SimKeys } from './keys.ts'
import { findSimModel, type ListPrice, type VeniceModel } from './models.ts'

// A 1x1 PNG: the smallest image every decoder accepts.
export const TINY_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='

export const MAX_IMAGES_PER_REQUEST = 4

interface ImageBody {
  model?: unknown
  prompt?: unknown
  n?: unknown
  variants?: unknown
  resolution?: unknown
  quality?: unknown
  return_binary?: unknown
}

const pick = <T>(table: Record<string, T> | undefined, name: unknown): T | undefined =>
  table && typeof name === 'string' && Object.hasOwn(table, name) ? table[name] : undefined

/** A tiered model's default tier: its first resolution, at its default quality where it has a matrix. */
function defaultTier(model: VeniceModel): { resolution?: string; quality?: string } {
  const { pricing, constraints } = model.model_spec
  const resolution = Object.keys(pricing?.quality ?? pricing?.resolutions ?? {})[0]
  return { resolution, quality: (constraints?.quality as { default?: string } | undefined)?.default }
}

/** The list price of one image as this request is billed; a Venice 400 when its tier is not listed. */
function imagePrice(model: VeniceModel, body: ImageBody, native: boolean): ListPrice | Response {
  const { pricing } = model.model_spec
  if (!pricing?.resolutions && !pricing?.quality) return pricing?.generation ?? { usd: 0, diem: 0 }
  const fallback = defaultTier(model)
  const tier = native
    ? { resolution: body.resolution ?? fallback.resolution, quality: body.quality }
    : fallback
  const byQuality = pricing.quality ? pick(pricing.quality, tier.resolution) : undefined
  const byResolution = pick(pricing.resolutions, tier.resolution)
  if (!byQuality && !byResolution) return veniceError(400, 'resolution is not supported by this model')
  if (!byQuality) return byResolution!
  const price = pick(byQuality, tier.quality ?? fallback.quality)
  return price ?? veniceError(400, 'quality is not supported by this model')
}

/** Either endpoint; `native`: Venice's `/image/generate` (`variants` images, answered `{id, images}`). */
export async function generateImages(
  keys: SimKeys,
  request: Request,
  timing: { latencyMs: number; slowFirstByteMs: number },
  native = false,
): Promise<Response> {
  const caller = authenticate(keys, request)
  if (caller instanceof Response) return caller
  let body: ImageBody
  try {
    body = (await request.json()) as ImageBody
  } catch {
    return veniceError(400, 'Invalid JSON body')
  }
  const model = typeof body?.model === 'string' ? findSimModel(body.model) : undefined
  if (model?.type !== 'image' || model.model_spec.offline)
    return veniceError(404, 'Specified model not found')
  if (typeof body.prompt !== 'string' || body.prompt === '') return veniceError(400, 'prompt is required')
  const n = (native ? body.variants : body.n) ?? 1
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_IMAGES_PER_REQUEST) {
    return veniceError(
      400,
      `${native ? 'variants' : 'n'} must be an integer from 1 to ${MAX_IMAGES_PER_REQUEST}`,
    )
  }
  if (native && body.return_binary !== false) return veniceError(400, 'only return_binary false is simulated')
  const listed = imagePrice(model, body, native)
  if (listed instanceof Response) return listed
  const admitted = preflight(keys, caller, request)
  if (admitted instanceof Response) return admitted
  if (admitted.fault === 'stall') {
    await sleepUnlessAborted(Number.POSITIVE_INFINITY, request.signal)
    return veniceError(499, 'client closed')
  }
  const delay =
    admitted.fault === 'slow_first_byte'
      ? (intHeader(request, 'x-sim-delay-ms') ?? timing.slowFirstByteMs)
      : 0
  const wait = timing.latencyMs + delay
  if (wait > 0 && !(await sleepUnlessAborted(wait, request.signal))) return veniceError(499, 'client closed')
  const perImage = parseMicros(listed.diem) ?? 0
  const debited = keys.debit(admitted.key, perImage * n)
  if (native) {
    const images = Array.from({ length: n }, () => TINY_PNG_BASE64)
    const id = `generate-image-${crypto.randomUUID()}`
    return json(200, { id, images, timing: { total: wait } }, admitted.balanceHeader)
  }
  return json(
    200,
    {
      created: Math.floor(Date.now() / 1000),
      data: Array.from({ length: n }, () => ({ b64_json: TINY_PNG_BASE64 })),
      cost: { diem: Number(formatMicros(debited)), usd: Number(formatMicros(debited)) },
    },
    admitted.balanceHeader,
  )
}
