// POST /v1/images/generations: OpenAI's request and answer, routed, held and cleared like text,
// with burn = the catalog's per-image price x the images delivered. One image job in flight per
// wallet, always (429 buyer_concurrency_limit).
import { Elysia } from 'elysia'
import { admitImages, deliveredImages, imageBodySchema } from '../../inference/image-request.ts'
import { costHeaders } from '../../inference/relay-buffered.ts'
import { clearBurn } from '../../inference/settle.ts'
import { formatMicros, type MicroDiem } from '../../money/units.ts'
import { buyerKeyAuth } from '../auth.ts'
import { ownResponse } from '../own-response.ts'
import {
  dispatchFor,
  type InferenceDeps,
  inferencePipeline,
  SUPPORT_REFERENCE_HEADER,
  settleFailure,
} from './pipeline.ts'

export const IMAGE_LANE = { name: 'img', cap: 1 }

export function imageRoutes(deps: InferenceDeps) {
  const pipeline = inferencePipeline(deps)
  return new Elysia({ name: 'svc/images', seed: deps.keys.prefix }).use(buyerKeyAuth(deps)).post(
    '/v1/images/generations',
    async ({ body, buyerKey, request, set }) => {
      const images = admitImages(body, await deps.catalog.get(body.model))
      const { context, supportReference, dispatched } = await dispatchFor(pipeline, buyerKey, request, {
        modelId: images.modelId,
        burnEstimate: images.burnEstimate,
        path: '/images/generations',
        body: images.upstreamBody,
        stream: false,
        isComplete: (json) => deliveredImages(json) !== null,
        lane: IMAGE_LANE,
      })
      const json = dispatched.json!
      // The buyer pays for the images delivered, never more than were asked for.
      const delivered = Math.min(deliveredImages(json) ?? 0, images.count)
      let settlement: Awaited<ReturnType<typeof clearBurn>>
      try {
        settlement = await clearBurn(
          pipeline.settling,
          dispatched.admission.attemptId,
          dispatched.preBalance ?? dispatched.admission.upstreamBalance,
          (images.perImage * delivered) as MicroDiem,
          { inputTokens: 0, outputTokens: delivered, estimated: false, outcome: 'completed' },
        )
      } catch (error) {
        throw settleFailure(error, supportReference)
      }
      context.costUsdc = formatMicros(settlement.charged)
      const data = (json.data as unknown[]).slice(0, delivered)
      return ownResponse(
        set,
        JSON.stringify({ created: json.created ?? Math.floor(Date.now() / 1000), data }),
        {
          'content-type': 'application/json',
          [SUPPORT_REFERENCE_HEADER]: supportReference,
          ...costHeaders(settlement),
        },
      )
    },
    { buyerKey: true, body: imageBodySchema },
  )
}
