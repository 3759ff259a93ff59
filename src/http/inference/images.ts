// POST /v1/images/generations: OpenAI's request and answer, routed, held and cleared like text,
// with burn = the image's price (the catalog's per-image price, or the price of the resolution and
// quality tier the request names) x the images delivered. One image job in flight per wallet,
// always (429 buyer_concurrency_limit).
import { Elysia } from 'elysia'
import { imageBodySchema } from '../../inference/image-request.ts'
import { costHeaders } from '../../inference/relay-buffered.ts'
import type { InferenceService } from '../../inference/service.ts'
import { formatMicros } from '../../money/units.ts'
import { SUPPORT_REFERENCE_HEADER } from '../../records/support-reference.ts'
import { buyerKeyAuth } from '../auth.ts'
import { ownResponse } from '../own-response.ts'
import { callOf, noteCost } from './call.ts'

export function imageRoutes(service: InferenceService) {
  const { deps } = service
  return new Elysia({ name: 'svc/images', seed: deps.keys.prefix }).use(buyerKeyAuth(deps)).post(
    '/v1/images/generations',
    async ({ body, buyerKey, request, set }) => {
      const call = callOf(request)
      const { created, data, clearing } = await service.generateImages(body, buyerKey, call)
      noteCost(request, formatMicros(clearing.charged))
      return ownResponse(set, JSON.stringify({ created, data }), {
        'content-type': 'application/json',
        [SUPPORT_REFERENCE_HEADER]: call.supportReference,
        ...costHeaders(clearing),
      })
    },
    { buyerKey: true, body: imageBodySchema },
  )
}
