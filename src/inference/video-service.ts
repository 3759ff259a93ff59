// Video, after Venice's flow, as a service: a no-wait quote (the catalog's quoted price); a queued
// job, held at that price and burned at what the admitted key's own quote says it is billed, whose
// hold lives until it is retrieved (cleared on the first MP4), refunded (the supplier failed it) or
// expired (both released in full). The routes only shape the answers.
import { ApiError, notFound } from '../errors.ts'
import { type Clearing, ClearingError } from '../market/clearing.ts'
import { refusalError } from '../market/refusal-errors.ts'
import type { MicroDiem } from '../money/units.ts'
import { endedAttempt } from '../records/attempt-record.ts'
import { AdmitCode } from '../redis/result-codes.ts'
import { UpstreamBodyTooLarge, type UpstreamResponse, upstreamRequest } from '../upstream/client.ts'
import { clearBurn } from './clear-usage.ts'
import type { Requester } from './dispatch.ts'
import type { InferenceCall, InferenceService } from './service.ts'
import { type VideoJob, type VideoJobState, VideoJobs } from './video-jobs.ts'
import { quoteForKey } from './video-quote.ts'
import { type ValidVideo, type VideoBody, validateVideo } from './video-request.ts'

const gone = (code: string, message: string) =>
  new ApiError(410, code, message, { type: 'invalid_request_error' })
const providerError = (message: string) => new ApiError(502, 'provider_error', message)

/** A job's media, read whole within the call's bound, or why not. */
async function mediaOf(upstream: UpstreamResponse): Promise<Buffer | 'too_large' | 'broken'> {
  const parts: Uint8Array[] = []
  try {
    for (let part = await upstream.read(); part; part = await upstream.read()) parts.push(part)
  } catch (error) {
    return error instanceof UpstreamBodyTooLarge ? 'too_large' : 'broken'
  }
  return Buffer.concat(parts)
}

type Ended = Exclude<VideoJobState, 'queued'>

/** What a retrieve found: the job still running, or its MP4 (with the clear, on the first). */
export type Retrieved =
  | { kind: 'processing'; job: VideoJob }
  | { kind: 'media'; media: Buffer; clearing: Clearing | null }

export class VideoService {
  private readonly jobs: VideoJobs
  private readonly ttlMs: number
  /** The clock a job's expiry is read on (a test moves it instead of waiting out the TTL). */
  private readonly now: () => number
  private readonly timeoutMs: number

  constructor(private readonly inference: InferenceService) {
    const { deps } = inference
    this.jobs = new VideoJobs(deps.store, deps.keys)
    this.ttlMs = deps.config.inference.videoJobTtlMs
    this.now = deps.config.inference.videoClock ?? Date.now
    this.timeoutMs = deps.config.inference.upstreamTimeoutMs
  }

  private async validate(body: VideoBody): Promise<ValidVideo> {
    return validateVideo(body, await this.inference.deps.catalog.get(body.model))
  }

  /** The price of a job at the ask it would clear at now (503 keys_busy when every key is busy). */
  async quote(accountId: string, body: VideoBody): Promise<{ video: ValidVideo; askCents: number }> {
    const video = await this.validate(body)
    const { config } = this.inference.deps
    const result = await this.inference.steps.quote(accountId, video.holdDiem, config.defaultMaxPriceCents)
    if (result.code === AdmitCode.Admitted) return { video, askCents: result.askCents }
    if (result.code === AdmitCode.KeysBusy) {
      throw new ApiError(503, 'keys_busy', 'every eligible supplier key is in flight; retry shortly', {
        headers: { 'retry-after': '1', 'x-svc-error-code': 'keys_busy' },
      })
    }
    throw refusalError(result)
  }

  /** Admits, holds the job's worst case until it ends, submits it upstream, and records the job. */
  async queue(
    body: VideoBody,
    requester: Requester & { accountId: string },
    call: InferenceCall,
  ): Promise<{ job: VideoJob; heldUsdc: number; askCents: number }> {
    const video = await this.validate(body)
    // Read before admission: the job's lease runs its TTL from admission, so the job's own expiry
    // counted from here ends first, and the reaper never takes the hold of a job still answering.
    const now = this.now()
    const burns = new Map<string, MicroDiem>()
    const dispatched = await this.inference.dispatch(call, requester, {
      modelId: video.modelId,
      holdDiem: video.holdDiem,
      path: '/video/queue',
      body: video.upstreamBody,
      stream: false,
      isComplete: (json) => typeof json.queue_id === 'string',
      before: async (admission, apiKey, signal) => {
        const quoted = await quoteForKey(video, admission.upstreamBaseUrl, apiKey, signal, this.timeoutMs)
        if (quoted.ok) burns.set(admission.attemptId, quoted.burn)
        return quoted.ok ? null : quoted
      },
      // The hold lives until the job is retrieved, refunded or expired.
      leaseMs: this.ttlMs,
    })
    const { admission } = dispatched
    // Set by the quote that let this attempt's queue go.
    const burn = burns.get(admission.attemptId)!
    // The job's own lease (its time to live) holds it from here until it is retrieved.
    this.inference.renewer.remove(admission.attemptId)
    const job: VideoJob = {
      id: `vid_${call.supportReference.slice(3)}`,
      supportReference: call.supportReference,
      attemptId: admission.attemptId,
      accountId: requester.accountId,
      model: video.modelId,
      seconds: video.seconds,
      burn,
      holdDiem: video.holdDiem,
      offerId: admission.offerId,
      upstreamBaseUrl: admission.upstreamBaseUrl,
      upstreamKeyEnc: admission.upstreamKeyEnc,
      preBalance: dispatched.preBalance ?? -1,
      queueId: String(dispatched.json!.queue_id),
      state: 'queued',
      createdAt: now,
      expiresAt: now + this.ttlMs,
      apiKeyId: admission.apiKeyId,
      askCents: admission.askCents,
      holdUsdc: admission.holdUsdc,
      requestId: admission.requestId,
      upstreamGen: admission.upstreamGen,
    }
    await this.jobs.create(job)
    // Kept until its master's replicas have it: a job whose record a failover lost would be unknown
    // to its buyer, and its clear at retrieve never sent.
    this.inference.deps.journal?.recordVideoJob(
      job.id,
      () => this.jobs.restore(job),
      this.jobs.writtenOn(job.id),
    )
    return { job, heldUsdc: admission.holdUsdc, askCents: admission.askCents }
  }

  /** The account's job: its status while it runs, then its MP4; 410 once refunded or expired. */
  async retrieve(jobId: string, accountId: string, signal: AbortSignal): Promise<Retrieved> {
    const job = await this.jobs.get(jobId)
    // Another account's job is as unknown as a job that never was.
    if (!job || job.accountId !== accountId)
      throw notFound(`video job '${jobId}' not found`, 'video_not_found')
    // A retrieve that runs past the job's lease keeps it: the reaper takes only a dead replica's.
    const { renewer } = this.inference
    if (job.state === 'queued') renewer.add(job)
    try {
      return await this.fetchJob(job, signal)
    } finally {
      renewer.remove(job.attemptId)
    }
  }

  /**
   * Ends a queued job without a charge (refund or expiry; the hold comes back in full), unless its
   * attempt ended first: charged by another poll's MP4, or ended uncharged by another poll. One the
   * reaper ended is ended for good here, so that another poll's MP4 cannot clear it late after this
   * answer said nothing was charged. The job's outcome is then the attempt's, what the money did.
   */
  private async endUncharged(job: VideoJob, outcome: 'refunded' | 'expired'): Promise<Ended> {
    const released = await this.inference.steps.release(job, {
      errorCode: outcome === 'refunded' ? 'video_refunded' : 'video_expired',
      cooldownMs: 0,
      upstreamBalance: null,
      final: true,
      recordRetentionMs: this.inference.dispatching.recordRetentionMs,
      endReaped: true,
    })
    // Not released by this call: ended already (a record past its retention: as asked).
    const ended = released ? outcome : ((await this.attemptOutcome(job)) ?? outcome)
    await this.jobs.settle(job.id, ended)
    return ended
  }

  /** How the job's attempt ended, as the script that moved its money wrote it; null while it has not. */
  private async attemptOutcome(job: VideoJob): Promise<Ended | null> {
    const { store, keys } = this.inference.deps
    const ended = endedAttempt(await store.hgetall(keys.accountAttempt(job.accountId, job.attemptId)))
    if (!ended) return null
    const { end, errorCode } = ended.record
    if (end === 'cleared') return 'completed'
    return end === 'reaped' || errorCode === 'video_expired' ? 'expired' : 'refunded'
  }

  /** A job ended uncharged: its 410; charged (another poll's MP4): answered as a charged job. */
  private async endedUncharged(
    job: VideoJob,
    outcome: 'refunded' | 'expired',
    signal: AbortSignal,
    expiredMessage = 'this job expired; nothing was charged',
  ): Promise<Retrieved> {
    const ended = await this.endUncharged(job, outcome)
    if (ended === 'completed') return this.fetchJob({ ...job, state: 'completed' }, signal)
    if (ended === 'refunded')
      throw gone('video_refunded', 'the supplier failed this job; it was refunded in full')
    throw gone('video_expired', ended === outcome ? expiredMessage : 'this job expired; nothing was charged')
  }

  private async fetchJob(job: VideoJob, signal: AbortSignal): Promise<Retrieved> {
    if (job.state === 'refunded')
      throw gone('video_refunded', 'the supplier failed this job; it was refunded in full')
    if (job.state === 'expired') throw gone('video_expired', 'this job expired; its media is gone')
    if (job.state === 'queued' && this.now() > job.expiresAt)
      return this.endedUncharged(
        job,
        'expired',
        signal,
        'this job expired before it was retrieved; nothing was charged',
      )
    const { config } = this.inference.deps
    let upstream: UpstreamResponse
    try {
      // The suppliers' own client: a redirect is an answer like any other, never followed.
      upstream = await upstreamRequest(`${job.upstreamBaseUrl}/video/retrieve`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${this.inference.dispatching.upstreamKeys.open(job.upstreamKeyEnc)}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ model: job.model, queue_id: job.queueId }),
        signal,
        deadline: { ms: config.inference.upstreamTimeoutMs, until: 'end' },
        maxBodyBytes: config.inference.maxUpstreamVideoBytes,
      })
    } catch {
      throw providerError('the provider did not answer; poll again')
    }
    const ok = upstream.status >= 200 && upstream.status < 300
    const type = upstream.header('content-type') ?? ''
    if (ok && type.startsWith('video/')) {
      const media = await mediaOf(upstream)
      if (media === 'too_large') {
        // Media the gateway will not relay is not delivered: the job is refunded, not charged.
        if (job.state === 'queued') return this.endedUncharged(job, 'refunded', signal)
        throw providerError('the provider could not answer; poll again')
      }
      if (media === 'broken') throw providerError('the provider did not answer; poll again')
      if (job.state !== 'queued') return { kind: 'media', media, clearing: null }
      // Another poll may have ended the job uncharged while this one read its MP4, its attempt
      // reaped meanwhile: a clear now would charge it late after the buyer was told it was not.
      const settled = await this.jobs.get(job.id)
      if (settled?.state === 'refunded' || settled?.state === 'expired') return this.fetchJob(settled, signal)
      let clearing: Clearing
      try {
        clearing = await clearBurn(
          this.inference.clearDeps,
          // The admission as admit answered it (an earlier build's job held its burn).
          { ...job, holdDiem: (job.holdDiem ?? job.burn) as MicroDiem },
          job.preBalance < 0 ? null : (job.preBalance as MicroDiem),
          job.burn as MicroDiem,
          { inputTokens: 0, outputTokens: job.seconds, estimated: false, outcome: 'completed' },
        )
      } catch (error) {
        // Another poll ended the job uncharged while this one read its MP4 (the supplier told it
        // the job failed, or it expired): the job's outcome stands, the media goes uncharged and
        // unsent.
        if (!(error instanceof ClearingError && error.reason === 'released')) throw error
        const ended = await this.attemptOutcome(job)
        if (ended) await this.jobs.settle(job.id, ended)
        if (ended === 'expired') throw gone('video_expired', 'this job expired; nothing was charged')
        throw gone('video_refunded', 'the supplier failed this job; it was refunded in full')
      }
      await this.jobs.settle(job.id, 'completed')
      return { kind: 'media', media, clearing }
    }
    // From here on only the status counts: the body is not read, and its connection closes.
    upstream.cancel()
    if (ok) return { kind: 'processing', job }
    // A job charged already (its MP4 delivered once) stays charged: what the supplier says now
    // about its media is never answered as a refund.
    if (job.state !== 'queued') {
      if (upstream.status === 404)
        throw gone(
          'video_expired',
          'the supplier no longer has this media; the job was charged when first retrieved',
        )
      throw providerError('the provider could not answer; poll again')
    }
    if (upstream.status === 404)
      return this.endedUncharged(
        job,
        'expired',
        signal,
        'the supplier no longer has this job; nothing was charged',
      )
    if (upstream.status === 500 || upstream.status === 422)
      return this.endedUncharged(job, 'refunded', signal)
    throw providerError('the provider could not answer; poll again')
  }
}
