// Video routes, after Venice's flow (the service half is src/inference/video-service.ts).
// POST /v1/video/quote: the price of a job at the ask it would clear at now; request id only.
// POST /v1/video/queue: admit, hold the worst case, submit upstream, answer a job id.
// POST /v1/video/retrieve: the job's status while it runs, then its MP4 (cleared on the first);
// a job the supplier failed is refunded in full and answers 410 from then on, as does an expired one.
import { Elysia, t } from 'elysia'
import { costHeaders } from '../../inference/relay-buffered.ts'
import type { InferenceService } from '../../inference/service.ts'
import type { VideoJob } from '../../inference/video-jobs.ts'
import { videoBodySchema } from '../../inference/video-request.ts'
import { VideoService } from '../../inference/video-service.ts'
import { costAtAsk, formatMicros } from '../../money/units.ts'
import { SUPPORT_REFERENCE_HEADER } from '../../records/support-reference.ts'
import { buyerAuth } from '../auth.ts'
import { ownResponse } from '../own-response.ts'
import { callOf } from './call.ts'

function jobView(job: Pick<VideoJob, 'id' | 'model' | 'seconds' | 'state'>) {
  const status = job.state === 'queued' ? 'processing' : job.state
  return { id: job.id, object: 'video.job', model: job.model, seconds: job.seconds, status }
}

export function videoRoutes(inference: InferenceService) {
  const { deps } = inference
  const video = new VideoService(inference)
  return new Elysia({ name: 'svc/video', seed: deps.keys.prefix })
    .use(buyerAuth(deps))
    .post(
      '/v1/video/quote',
      async ({ body, buyer }) => {
        const { video: job, askCents } = await video.quote(buyer.accountId, body)
        return {
          object: 'video.quote',
          model: job.modelId,
          seconds: job.seconds,
          quoteUsdc: formatMicros(costAtAsk(job.holdDiem, askCents)),
          clearingPriceCents: askCents,
        }
      },
      { buyer: true, body: videoBodySchema },
    )
    .post(
      '/v1/video/queue',
      async ({ body, buyer, request, set }) => {
        const call = callOf(request)
        const requester = { accountId: buyer.accountId, apiKeyId: buyer.keyId }
        const { job, heldUsdc, askCents } = await video.queue(body, requester, call)
        return ownResponse(
          set,
          JSON.stringify({
            ...jobView(job),
            status: 'queued',
            heldUsdc: formatMicros(heldUsdc),
            clearingPriceCents: askCents,
            expiresAt: new Date(job.expiresAt).toISOString(),
          }),
          { 'content-type': 'application/json', [SUPPORT_REFERENCE_HEADER]: call.supportReference },
        )
      },
      { buyer: true, body: videoBodySchema },
    )
    .post(
      '/v1/video/retrieve',
      async ({ body, buyer, request, set }) => {
        const retrieved = await video.retrieve(body.id, buyer.accountId, request.signal)
        if (retrieved.kind === 'processing') return Response.json(jobView(retrieved.job))
        const headers: Record<string, string> = { 'content-type': 'video/mp4' }
        if (retrieved.clearing) Object.assign(headers, costHeaders(retrieved.clearing))
        return ownResponse(set, retrieved.media, headers)
      },
      { buyer: true, body: t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) }) },
    )
}
