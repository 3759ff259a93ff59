// The tier an image request lands on, for a model the upstream bills by tier: the `resolution` it
// names (`1K` ...) and, on a model with a quality matrix, the `quality` it names or the model's
// published default. A request that does not name its tier, or names one not listed, is a 400 that
// names the parameter: a price the upstream's bill may differ from is never guessed.
import type { ImageTiers } from '../catalog/entry.ts'
import { ApiError } from '../errors.ts'

/** Sizes in pixels: how the upstream tiers them is not published, so they would make the bill a guess. */
const PIXEL_SIZES = ['size', 'width', 'height'] as const

function refusal(param: string, message: string, code = `invalid_${param}`): ApiError {
  return new ApiError(400, code, message, { extra: { param } })
}

/** The table's entry the request names; a 400 naming `param` when it names none or one not listed. */
function named<T>(table: Record<string, T>, param: string, modelId: string, sent: unknown, why: string): T {
  if (typeof sent === 'string' && Object.hasOwn(table, sent)) return table[sent]!
  const options = Object.keys(table).join(', ')
  throw refusal(
    param,
    sent == null
      ? `${param} is required for ${modelId}, ${why}: send one of ${options}`
      : `${param} must be one of ${options} for ${modelId}`,
  )
}

/**
 * One image's price at the tier the request names, and the fields that name that tier to the
 * upstream (a default quality is sent as such, so the upstream bills the tier that was held).
 */
export function tierPrice(
  modelId: string,
  tiers: ImageTiers,
  body: Record<string, unknown>,
): { perImage: number; pinned: Record<string, string> } {
  for (const param of PIXEL_SIZES) {
    if (body[param] == null) continue
    throw refusal(
      param,
      `${param} is not supported on ${modelId}, which is billed by resolution tier: send resolution (and aspect_ratio) instead`,
      'unsupported_parameter',
    )
  }
  const matrix = tiers.quality
  const byResolution: Record<string, unknown> = matrix ?? tiers.resolutions ?? {}
  const why = 'which is billed by resolution tier'
  named(byResolution, 'resolution', modelId, body.resolution, why)
  const resolution = body.resolution as string
  if (!matrix) return { perImage: tiers.resolutions![resolution]!, pinned: { resolution } }
  const row = matrix[resolution]!
  const fallback = tiers.defaultQuality
  const quality = body.quality ?? (fallback !== undefined && Object.hasOwn(row, fallback) ? fallback : null)
  const because = `which is billed by quality tier and publishes no default quality at ${resolution}`
  const perImage = named(row, 'quality', modelId, quality, because)
  return { perImage, pinned: { resolution, quality: quality as string } }
}

/** The image formats the upstream's native endpoint returns; OpenAI's `output_format` names them alike. */
const FORMATS = ['png', 'jpeg', 'webp']

/**
 * The upstream's native request (`POST /image/generate`) for a tiered model: the only endpoint that
 * takes `resolution` and `quality` and bills the tier they name (its OpenAI-compatible one may bill
 * a default tier of its own). It makes one image per call, so a request for more is refused rather
 * than billed at a count the upstream's answer cannot be held to. Only the fields that name the
 * image are sent: one passed through unread could move the bill off the tier that was held.
 */
export function nativeImageBody(
  modelId: string,
  body: Record<string, unknown>,
  pinned: Record<string, string>,
): Record<string, unknown> {
  if (body.n != null && body.n !== 1) {
    throw refusal(
      'n',
      `n must be 1 on ${modelId}, which is billed by tier and makes one image per request: send one request per image`,
      'unsupported_parameter',
    )
  }
  const { aspect_ratio, output_format } = body
  if (aspect_ratio != null && (typeof aspect_ratio !== 'string' || aspect_ratio === '')) {
    throw refusal('aspect_ratio', `aspect_ratio must be a ratio such as '16:9' for ${modelId}`)
  }
  if (output_format != null && !FORMATS.includes(output_format as string)) {
    throw refusal('output_format', `output_format must be one of ${FORMATS.join(', ')} for ${modelId}`)
  }
  return {
    model: modelId,
    prompt: body.prompt,
    ...pinned,
    ...(aspect_ratio != null && { aspect_ratio }),
    // PNG unless the buyer names another, as OpenAI's images answer; base64 inside JSON, never bytes.
    format: output_format ?? 'png',
    return_binary: false,
  }
}
