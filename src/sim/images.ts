// The simulated supplier's image endpoint, OpenAI-compatible (`POST /images/generations`): a
// small valid PNG per image, each debited at the model's list price per image.
import { formatMicros, parseMicros } from '../money/units.ts'
import { authenticate, intHeader, json, preflight, sleepUnlessAborted, veniceError } from './http.ts'
import type { SimKeys } from './keys.ts'
import { findSimModel } from './models.ts'

// A 1x1 PNG: the smallest image every decoder accepts.
export const TINY_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='

export const MAX_IMAGES_PER_REQUEST = 4

interface ImageBody {
  model?: unknown
  prompt?: unknown
  n?: unknown
}

export async function generateImages(
  keys: SimKeys,
  request: Request,
  timing: { latencyMs: number; slowFirstByteMs: number },
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
  const n = body.n ?? 1
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_IMAGES_PER_REQUEST) {
    return veniceError(400, `n must be an integer from 1 to ${MAX_IMAGES_PER_REQUEST}`)
  }
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
  const perImage = parseMicros(model.model_spec.pricing?.generation?.diem ?? 0) ?? 0
  const debited = keys.debit(admitted.key, perImage * n)
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
