// An image request, validated and admitted: a live image model, how many images, the price of one
// image (the catalog's flat price, or that of the tier the request names), the worst-case burn (that
// price x n), and the supplier endpoint and body: OpenAI's `/images/generations` for a flat-priced
// model, the upstream's native `/image/generate` for one billed by tier (image-tier.ts).
import { t } from 'elysia'
import type { CatalogEntry } from '../catalog/entry.ts'
import { badRequest } from '../errors.ts'
import type { MicroDiem } from '../money/units.ts'
import { callableModel } from './callable-model.ts'
import { nativeImageBody, tierPrice } from './image-tier.ts'

export const MAX_IMAGES = 4

/**
 * OpenAI's request shape; other fields (size, quality, style ...) pass through to a flat-priced
 * model, and a model billed by tier reads its `resolution`, `quality`, `aspect_ratio` and
 * `output_format` (image-tier.ts). `response_format` and `stream` are checked by validateImages, so a
 * refusal can say what is supported.
 */
export const imageBodySchema = t.Object(
  {
    model: t.String({ minLength: 1, maxLength: 256 }),
    prompt: t.String({ minLength: 1, maxLength: 32_000 }),
    n: t.Optional(t.Union([t.Number({ multipleOf: 1, minimum: 1, maximum: MAX_IMAGES }), t.Null()])),
    response_format: t.Optional(t.Union([t.String(), t.Null()])),
    stream: t.Optional(t.Union([t.Boolean(), t.Null()])),
  },
  { additionalProperties: true },
)

export type ImageBody = typeof imageBodySchema.static

export interface ValidImages {
  modelId: string
  count: number
  perImage: MicroDiem
  holdDiem: MicroDiem
  /** The supplier's endpoint: `/images/generations`, or `/image/generate` for a tiered model. */
  path: string
  upstreamBody: Record<string, unknown>
  /** The images a supplier answer to that endpoint delivered; null when it is no image answer. */
  read: (json: Record<string, unknown>) => DeliveredImage[] | null
}

/**
 * Images come back inline as base64, in one JSON answer: a URL would need the gateway to host the
 * image, and suppliers do not stream partial images. Asked for either, the buyer is told so.
 */
function checkDelivery(body: ImageBody): void {
  if (body.response_format != null && body.response_format !== 'b64_json') {
    throw badRequest(
      `response_format '${body.response_format}' is not supported: images are returned as b64_json only`,
      'unsupported_response_format',
    )
  }
  if (body.stream === true) {
    throw badRequest(
      'stream is not supported on images: the answer is one JSON body with b64_json images; send stream: false or omit it',
      'unsupported_parameter',
    )
  }
}

export function validateImages(body: ImageBody, entry: CatalogEntry | undefined): ValidImages {
  checkDelivery(body)
  const { row, prices } = callableModel(entry, body.model, 'image', [])
  const tier = prices.imageTiers ? tierPrice(row.id, prices.imageTiers, body) : undefined
  const perImage = tier?.perImage ?? prices.perImage
  if (perImage === undefined) throw badRequest(`model '${row.id}' is not live yet`, 'model_not_live')
  const count = body.n ?? 1
  const priced = { modelId: row.id, count, perImage: perImage as MicroDiem }
  const holdDiem = (perImage * count) as MicroDiem
  if (tier) {
    // The tier is sent as billed: the upstream bills this request at it, not at a default of its own.
    const upstreamBody = nativeImageBody(row.id, body, tier.pinned)
    return { ...priced, holdDiem, path: '/image/generate', upstreamBody, read: nativeImages }
  }
  return {
    ...priced,
    holdDiem,
    path: '/images/generations',
    upstreamBody: { ...withoutStream(body), model: row.id, n: count, response_format: 'b64_json' },
    read: deliveredImages,
  }
}

function withoutStream(body: ImageBody): Record<string, unknown> {
  const { stream: _, ...rest } = body
  return rest
}

/** One image as relayed: its bytes (and the prompt the model used, when it says so); nothing else. */
export interface DeliveredImage {
  b64_json: string
  revised_prompt?: string
}

/**
 * The images a supplier answer delivered, as relayed; null when the body is not an image answer.
 * Only an entry with b64_json bytes is an image: an empty entry, or a URL the gateway never asked
 * for (one to a private address, say), is neither paid for nor passed on.
 */
export function deliveredImages(json: Record<string, unknown>): DeliveredImage[] | null {
  if (!Array.isArray(json.data)) return null
  const images: DeliveredImage[] = []
  for (const entry of json.data as unknown[]) {
    const { b64_json, revised_prompt } = (entry ?? {}) as Record<string, unknown>
    if (typeof b64_json !== 'string' || b64_json === '') continue
    images.push(typeof revised_prompt === 'string' ? { b64_json, revised_prompt } : { b64_json })
  }
  return images
}

/** The images of a native answer (`{id, images: [<base64>...]}`), as OpenAI's answer carries them. */
export function nativeImages(json: Record<string, unknown>): DeliveredImage[] | null {
  if (!Array.isArray(json.images)) return null
  const images = json.images as unknown[]
  return images
    .filter((b64) => typeof b64 === 'string' && b64 !== '')
    .map((b64) => ({ b64_json: b64 as string }))
}
