// Video, after Venice's flow. POST /v1/video/quote: a no-wait select, the price of a job at the
// ask it would clear at now (503 keys_busy when every eligible key is in flight); request id only.
// POST /v1/video/queue: admit, hold the worst case, submit upstream, answer a job id.
// POST /v1/video/retrieve: the job's status while it runs, then its MP4 (cleared on the first);
// a job the supplier failed is refunded in full and answers 410 from then on, as does an expired one.
import { Elysia, t } from 'elysia'
import { costHeaders } from '../../inference/relay-buffered.ts'
import { clearBurn } from '../../inference/settle.ts'
import { type VideoJob, VideoJobs } from '../../inference/video-jobs.ts'
import { admitVideo, videoBodySchema } from '../../inference/video-request.ts'
import { AdmitCode, refusalError } from '../../market/result-codes.ts'
import { refusalOf, release } from '../../market/settlement.ts'
import { costAtAsk, formatMicros, type MicroDiem } from '../../money/units.ts'
import { runScript } from '../../redis/scripts.ts'
import { buyerAuth } from '../auth.ts'
import { ApiError, notFound } from '../errors.ts'
import { ownResponse, type SetHeaders } from '../own-response.ts'
import { dispatchFor, type InferenceDeps, inferencePipeline, SUPPORT_REFERENCE_HEADER } from './pipeline.ts'

const gone = (code: string, message: string) =>
  new ApiError(410, code, message, { type: 'invalid_request_error' })

async function quoteAsk(deps: InferenceDeps, accountId: string, burn: MicroDiem): Promise<number> {
  const reply = (await runScript(
    deps.redis,
    'quote',
    [deps.keys.base],
    [accountId, burn, deps.config.defaultMaxPriceCents],
  )) as (string | number)[]
  const code = Number(reply[0])
  if (code === 1) return Number(reply[1])
  if (code === AdmitCode.KeysBusy) {
    throw new ApiError(503, 'keys_busy', 'every eligible supplier key is in flight; retry shortly', {
      headers: { 'x-svc-error-code': 'keys_busy' },
    })
  }
  throw refusalError(refusalOf(reply))
}

function jobView(job: Pick<VideoJob, 'id' | 'model' | 'seconds' | 'state'>) {
  const status = job.state === 'queued' ? 'processing' : job.state
  return { id: job.id, object: 'video.job', model: job.model, seconds: job.seconds, status }
}

export function videoRoutes(deps: InferenceDeps) {
  const pipeline = inferencePipeline(deps)
  const jobs = new VideoJobs(deps.redis, deps.keys)
  const ttlMs = deps.config.inference.videoJobTtlMs

  /** Ends a queued job without a charge (refund or expiry); the hold comes back in full. */
  async function endUncharged(job: VideoJob, outcome: 'refunded' | 'expired', balance: MicroDiem | null) {
    await release(deps.redis, deps.keys, {
      attemptId: job.attemptId,
      errorCode: outcome === 'refunded' ? 'video_refunded' : 'video_expired',
      cooldownMs: 0,
      upstreamBalance: balance,
      final: true,
      recordRetentionMs: pipeline.dispatching.recordRetentionMs,
    })
    await jobs.settle(job.id, outcome)
  }

  async function retrieve(job: VideoJob, signal: AbortSignal, set: SetHeaders): Promise<Response> {
    if (job.state === 'refunded')
      throw gone('video_refunded', 'the supplier failed this job; it was refunded in full')
    if (job.state === 'expired') throw gone('video_expired', 'this job expired; its media is gone')
    if (job.state === 'queued' && Date.now() > job.expiresAt) {
      await endUncharged(job, 'expired', null)
      throw gone('video_expired', 'this job expired before it was retrieved; nothing was charged')
    }
    let upstream: Response
    try {
      upstream = await fetch(`${job.upstreamBaseUrl}/video/retrieve`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${pipeline.dispatching.upstreamKeys.open(job.upstreamKeyEnc)}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ model: job.model, queue_id: job.queueId }),
        signal: AbortSignal.any([signal, AbortSignal.timeout(deps.config.inference.upstreamTimeoutMs)]),
      })
    } catch {
      throw new ApiError(502, 'provider_error', 'the provider did not answer; poll again')
    }
    const type = upstream.headers.get('content-type') ?? ''
    if (upstream.ok && type.startsWith('video/')) {
      const media = await upstream.arrayBuffer()
      const headers: Record<string, string> = { 'content-type': 'video/mp4' }
      if (job.state === 'queued') {
        const settlement = await clearBurn(
          pipeline.settling,
          job.attemptId,
          job.preBalance < 0 ? null : (job.preBalance as MicroDiem),
          job.burn as MicroDiem,
          { inputTokens: 0, outputTokens: job.seconds, estimated: false, outcome: 'completed' },
        )
        await jobs.settle(job.id, 'completed')
        Object.assign(headers, costHeaders(settlement))
      }
      return ownResponse(set, media, headers)
    }
    if (upstream.ok) return Response.json(jobView(job))
    if (upstream.status === 404) {
      if (job.state === 'queued') await endUncharged(job, 'expired', null)
      throw gone('video_expired', 'the supplier no longer has this job; nothing was charged')
    }
    if (upstream.status === 500 || upstream.status === 422) {
      if (job.state === 'queued') await endUncharged(job, 'refunded', null)
      throw gone('video_refunded', 'the supplier failed this job; it was refunded in full')
    }
    throw new ApiError(502, 'provider_error', 'the provider could not answer; poll again')
  }

  return new Elysia({ name: 'svc/video', seed: deps.keys.prefix })
    .use(buyerAuth(deps))
    .post(
      '/v1/video/quote',
      async ({ body, buyer }) => {
        const video = admitVideo(body, await deps.catalog.get(body.model))
        const ask = await quoteAsk(deps, buyer.accountId, video.burnEstimate)
        return {
          object: 'video.quote',
          model: video.modelId,
          seconds: video.seconds,
          quoteUsdc: formatMicros(costAtAsk(video.burnEstimate, ask)),
          clearingPriceCents: ask,
        }
      },
      { buyer: true, body: videoBodySchema },
    )
    .post(
      '/v1/video/queue',
      async ({ body, buyer, request, set }) => {
        const video = admitVideo(body, await deps.catalog.get(body.model))
        const { supportReference, dispatched } = await dispatchFor(
          pipeline,
          { accountId: buyer.accountId, apiKeyId: buyer.keyId },
          request,
          {
            modelId: video.modelId,
            burnEstimate: video.burnEstimate,
            path: '/video/queue',
            body: video.upstreamBody,
            stream: false,
            isComplete: (json) => typeof json.queue_id === 'string',
            // The hold lives until the job is retrieved, refunded or expired.
            leaseMs: ttlMs,
          },
        )
        const { admission } = dispatched
        const now = Date.now()
        const job: VideoJob = {
          id: `vid_${supportReference.slice(3)}`,
          supportReference,
          attemptId: admission.attemptId,
          accountId: buyer.accountId,
          model: video.modelId,
          seconds: video.seconds,
          burn: video.burnEstimate,
          offerId: admission.offerId,
          upstreamBaseUrl: admission.upstreamBaseUrl,
          upstreamKeyEnc: admission.upstreamKeyEnc,
          preBalance: dispatched.preBalance ?? -1,
          queueId: String(dispatched.json!.queue_id),
          state: 'queued',
          createdAt: now,
          expiresAt: now + ttlMs,
        }
        await jobs.create(job)
        return ownResponse(
          set,
          JSON.stringify({
            ...jobView(job),
            status: 'queued',
            heldUsdc: formatMicros(admission.holdUsdc),
            clearingPriceCents: admission.askCents,
            expiresAt: new Date(job.expiresAt).toISOString(),
          }),
          { 'content-type': 'application/json', [SUPPORT_REFERENCE_HEADER]: supportReference },
        )
      },
      { buyer: true, body: videoBodySchema },
    )
    .post(
      '/v1/video/retrieve',
      async ({ body, buyer, request, set }) => {
        const job = await jobs.get(body.id)
        // Another account's job is as unknown as a job that never was.
        if (!job || job.accountId !== buyer.accountId)
          throw notFound(`video job '${body.id}' not found`, 'video_not_found')
        return retrieve(job, request.signal, set)
      },
      { buyer: true, body: t.Object({ id: t.String({ minLength: 1, maxLength: 64 }) }) },
    )
}
