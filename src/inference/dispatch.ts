// Dispatch: admit -> call the supplier -> on a failure before any byte, release that hold, cool
// the offer down, and admit the next cheapest offer not yet tried: up to five offers.
import type { Logger } from 'pino'
import type { MarketConfig } from '../config.ts'
import { ApiError } from '../errors.ts'
import { type Admission, whoseRequest } from '../market/admission.ts'
import type { LeaseRenewer } from '../market/lease-renewer.ts'
import { type AdmitRefusal, refusalError } from '../market/refusal-errors.ts'
import type { MarketSteps } from '../market/steps.ts'
import type { UpstreamKeyCache } from '../market/upstream-key-crypto.ts'
import { metrics } from '../metrics/gateway-metrics.ts'
import type { MicroDiem } from '../money/units.ts'
import { attemptIdOf, MAX_ATTEMPTS } from '../records/attempt-id.ts'
import { DEFAULT_RECORD_RETENTION_MS, recordRefusal } from '../records/refusals.ts'
import { attachSupportReference } from '../records/support-reference.ts'
import { AdmitCode } from '../redis/result-codes.ts'
import type { Store } from '../redis/store.ts'
import type { UpstreamResponse } from '../upstream/client.ts'
import { fitChat, type ValidChat } from './chat-request.ts'
import { admitWaiting } from './key-wait.ts'
import { readUsage } from './meter.ts'
import { answerText } from './relay-buffered.ts'
import { callSupplier } from './supplier.ts'
import { UpstreamEvents } from './upstream-events.ts'

export interface DispatchDeps {
  store: Store
  /** Every step of an attempt against the store (admit, release; renewals through the renewer). */
  steps: MarketSteps
  market: MarketConfig
  defaultMaxPriceCents: number
  upstreamKeys: UpstreamKeyCache
  upstreamTimeoutMs: number
  firstByteTimeoutMs: number
  /** A buffered answer's bound (SVC_MAX_UPSTREAM_BODY_BYTES). */
  maxBodyBytes: number
  /** A stream frame's bound (SVC_MAX_UPSTREAM_FRAME_BYTES). */
  maxFrameBytes: number
  /** A whole stream's bound (SVC_MAX_UPSTREAM_STREAM_BYTES). */
  maxStreamBytes: number
  logger: Logger
  /**
   * Renews the lease of every admitted attempt from its admission on, so a slow supplier call never
   * outlives it. Dispatch lets go of a failed attempt; whoever clears a dispatched one lets go of it.
   */
  renewer: LeaseRenewer
  /** How long an ended attempt is kept as its request's record. */
  recordRetentionMs?: number
}

/** What one supplier call is: the same dispatch serves chat, Responses and images. */
export interface UpstreamJob {
  modelId: string
  /** The worst case the market holds for this request. */
  holdDiem: MicroDiem
  /** Under the supplier's base URL. */
  path: string
  body: Record<string, unknown>
  stream: boolean
  /** Whether a buffered answer is whole; a broken one falls forward. */
  isComplete: (json: Record<string, unknown>) => boolean
  /** Whether a complete answer delivered anything to pay for; absent: every complete one did. */
  delivered?: (json: Record<string, unknown>) => boolean
  /** An extra per-wallet in-flight count with its own cap (images: one at a time). */
  capGroup?: { name: string; cap: number }
  /** The hold's lease when it must outlive the call (video: until the job is retrieved). */
  leaseMs?: number
  /** The chat request this job sends, when it is one. */
  chat?: ValidChat
  /** Asked with the admitted key before the call (video: its quote); its failure is one before any byte. */
  before?: (admission: Admission, apiKey: string, signal: AbortSignal) => Promise<SupplierFailure | null>
  /**
   * The same job asking for less, when the balance (`confirmed` micro-USDC at `askCents`) cannot
   * hold all it asks for; null when it cannot be made to fit.
   */
  fit?: (confirmed: number, askCents: number) => UpstreamJob | null
}

export function chatJob(chat: ValidChat): UpstreamJob {
  return {
    modelId: chat.model.id,
    holdDiem: chat.holdDiem,
    path: '/chat/completions',
    body: chat.upstreamBody,
    stream: chat.stream,
    isComplete: (json) => Array.isArray(json.choices),
    // An answer with no usage and nothing generated delivered nothing: it is not paid for, and the
    // next offer is tried, as a stream that ends so is released.
    delivered: (json) => readUsage(json.usage) !== null || answerText(json) !== '',
    chat,
    fit: (confirmed, askCents) => {
      const fitted = fitChat(chat, confirmed, askCents)
      return fitted && chatJob(fitted)
    },
  }
}

/** Whose request: the account and key ids, or the key's digest for admit to resolve (one round trip fewer). */
export type Requester = { accountId: string; apiKeyId: string } | { apiKeyDigest: string }

export interface DispatchRequest {
  requester: Requester
  requestId: string
  supportReference: string
  job: UpstreamJob
  signal: AbortSignal
}

export interface Dispatched {
  admission: Admission
  /** The job as admitted (fitted to the balance when it had to be). */
  job: UpstreamJob
  /** The supplier's answer; a stream's is already past its first bytes (`head`). */
  response: UpstreamResponse
  preBalance: Admission['upstreamBalance']
  /** For streams: the supplier's events, parsed from the bytes read so far. */
  events?: UpstreamEvents
  /** For buffered answers: the supplier's JSON, read whole (a broken body falls forward). */
  json?: Record<string, unknown>
  /** Offer ids tried before this one (all failed before any byte). */
  failedOffers: string[]
}

/**
 * The first bytes of the stream, or null when it ended or broke first. The call's deadline
 * (SVC_FIRST_BYTE_TIMEOUT_MS from the request, callSupplier) fails the read when they are late.
 */
function firstBytes(response: UpstreamResponse): Promise<Uint8Array | null> {
  return response.read().then(
    (value) => value,
    () => null,
  )
}

/**
 * Reads on until the supplier's first frame is whole (or the stream ends, breaks, or its first frame
 * passes the bound), so that a stream whose first frame never ends falls forward before any byte
 * reaches the client rather than being relayed as an answer with nothing in it. It has what is left
 * of the call's first-byte time (counted from `started`); past that the stream counts as broken.
 */
export async function firstFrame(
  response: UpstreamResponse,
  events: UpstreamEvents,
  started: number,
  timeoutMs: number,
): Promise<void> {
  let late = false
  const timer = setTimeout(
    () => {
      late = true
      response.cancel()
    },
    Math.max(0, timeoutMs - (performance.now() - started)),
  )
  try {
    while (!events.framed()) {
      const got = await response.read()
      if (late) return events.end('broken')
      if (got === null) return events.end('done')
      events.push(got)
    }
  } catch {
    events.end('broken')
  } finally {
    clearTimeout(timer)
  }
}

/** A buffered answer, whole and well-formed, or null (truncated, not JSON, not the job's shape). */
async function completeBody(
  response: UpstreamResponse,
  job: UpstreamJob,
): Promise<Record<string, unknown> | null> {
  try {
    const json = (await response.json()) as Record<string, unknown>
    return json && typeof json === 'object' && job.isComplete(json) ? json : null
  } catch {
    return null
  }
}

/** Statuses of a first refusal at admission that get a recorded attempt (not 401 or 500). */
const RECORDED_REFUSALS = [402, 403, 429, 503]

/**
 * The error when no supplier served the request. Every attempt that was admitted is recorded
 * already (released). A refusal is recorded here as the request's last attempt: before any was
 * admitted, with the refusal's own code; after some failed, as the 502 the buyer gets. Either way
 * the error carries the support reference, unless recording failed.
 */
async function noSupplier(
  deps: DispatchDeps,
  req: DispatchRequest,
  lastRefusal: AdmitRefusal | null,
  failed: string[],
  who: { accountId: string; apiKeyId: string } | null,
): Promise<ApiError> {
  const providerError = () =>
    new ApiError(502, 'provider_error', 'the provider could not complete the request; safe to retry')
  // Five failed: the fifth release was the last attempt.
  if (!lastRefusal) return attachSupportReference(providerError(), req.supportReference)
  const afterFailures = failed.length > 0
  const error = afterFailures ? providerError() : refusalError(lastRefusal)
  if (!who || (!afterFailures && !RECORDED_REFUSALS.includes(error.status))) return error
  try {
    await recordRefusal(
      deps.store,
      deps.steps.accountKeys(who.accountId),
      {
        attemptId: attemptIdOf(req.supportReference, failed.length + 1),
        ...who,
        requestId: req.requestId,
        model: req.job.modelId,
        errorCode: error.code,
      },
      deps.recordRetentionMs ?? DEFAULT_RECORD_RETENTION_MS,
    )
    return attachSupportReference(error, req.supportReference)
  } catch (recording) {
    deps.logger.warn(
      { requestId: req.requestId, err: (recording as Error).message },
      'could not record a refusal',
    )
    // The failed attempts are recorded all the same.
    return afterFailures ? attachSupportReference(error, req.supportReference) : error
  }
}

type SupplierFailure = Extract<Awaited<ReturnType<typeof callSupplier>>, { ok: false }>

const brokenBefore = (code: string): SupplierFailure => ({
  ok: false,
  code,
  clientError: false,
  status: null,
  message: '',
  balance: null,
})

/** One admitted attempt's supplier call: the dispatched answer, or why it failed before any byte. */
async function callAdmitted(
  deps: DispatchDeps,
  req: DispatchRequest,
  job: UpstreamJob,
  admission: Admission,
  failed: string[],
  bodyText: string,
): Promise<Dispatched | SupplierFailure> {
  const apiKey = deps.upstreamKeys.open(admission.upstreamKeyEnc)
  // A text call has no step before it: it awaits nothing more.
  const refused = job.before ? await job.before(admission, apiKey, req.signal) : null
  if (refused) return refused
  const started = performance.now()
  const outcome = await callSupplier({
    baseUrl: admission.upstreamBaseUrl,
    apiKey,
    path: job.path,
    body: bodyText,
    stream: job.stream,
    signal: req.signal,
    timeoutMs: job.stream ? deps.firstByteTimeoutMs : deps.upstreamTimeoutMs,
    maxBodyBytes: job.stream ? deps.maxStreamBytes : deps.maxBodyBytes,
  })
  if (!outcome.ok) return outcome
  const answered = {
    admission,
    job,
    response: outcome.response,
    preBalance: outcome.preBalance,
    failedOffers: failed,
  }
  if (job.stream) {
    // Nothing has gone to the client yet: a stream that dies before its first frame falls forward too.
    const head = await firstBytes(outcome.response)
    // A read cut by the buyer's leaving is not the supplier's failure: no cooldown for it.
    if (!head) {
      outcome.response.cancel()
      return brokenBefore(req.signal.aborted ? 'client_closed' : 'upstream_no_first_byte')
    }
    const events = new UpstreamEvents(deps.maxFrameBytes, head, job.modelId)
    if (!events.framed()) await firstFrame(outcome.response, events, started, deps.firstByteTimeoutMs)
    // A supplier whose first frame is an error failed before anything reached the client: the
    // request falls forward at no charge rather than being billed as a stream cut short.
    if (events.brokeBeforeContent()) {
      outcome.response.cancel()
      return brokenBefore(req.signal.aborted ? 'client_closed' : 'upstream_stream_error')
    }
    return { ...answered, events }
  }
  const json = await completeBody(outcome.response, job)
  if (!json) return brokenBefore('upstream_broken_body')
  return job.delivered?.(json) === false ? brokenBefore('upstream_no_content') : { ...answered, json }
}

export async function dispatch(deps: DispatchDeps, req: DispatchRequest): Promise<Dispatched> {
  const failed: string[] = []
  let refusal: AdmitRefusal | null = null
  // Every attempt names the key as the first did: by its digest, the steps name it by its ids after
  // the first (src/market/key-owners.ts), and by its digest again while a replica of an earlier
  // build, whose revoke leaves no mark, is seen.
  const requester = req.requester
  let who = 'accountId' in requester ? requester : null
  let job = req.job
  // The body sent for `job`, made once however many offers it is sent to.
  let sent = { job: null as UpstreamJob | null, text: '' }
  for (let n = 1; n <= MAX_ATTEMPTS; n++) {
    const attemptId = attemptIdOf(req.supportReference, n)
    const admitting = admitWaiting(deps, req, job, requester, attemptId, failed)
    // The supplier's body is written while the admit is in Redis, where this process would only wait.
    if (sent.job !== job) sent = { job, text: JSON.stringify(job.body) }
    let result = await admitting
    if ((result.code === AdmitCode.InsufficientBalance || result.code === AdmitCode.KeyLimit) && job.fit) {
      // Asked for no limit: the limit the balance (and the key's limit) affords at that ask.
      const affordable =
        result.code === AdmitCode.KeyLimit
          ? Math.min(result.confirmed, Math.max(0, result.limit - result.used))
          : result.confirmed
      const fitted = job.fit(affordable, result.askCents)
      if (fitted) {
        job = fitted
        result = await admitWaiting(deps, req, job, requester, attemptId, failed)
      }
    }
    const resolved = whoseRequest(result)
    if (resolved) who = { accountId: resolved.accountId, apiKeyId: resolved.apiKeyId }
    if (result.code !== AdmitCode.Admitted) {
      refusal = result
      break
    }
    // Held by the renewer from the admit's answer on (admitWaiting).
    const admission = result as Admission
    let call: Dispatched | SupplierFailure
    try {
      if (sent.job !== job) sent = { job, text: JSON.stringify(job.body) }
      call = await callAdmitted(deps, req, job, admission, failed, sent.text)
    } catch (error) {
      // Not a supplier's failure but ours (an upstream key that does not open, a bug): the attempt
      // ends here with nothing charged, rather than hold until the reaper takes its lease.
      await deps.steps
        .release(admission, {
          errorCode: 'gateway_error',
          cooldownMs: 0,
          upstreamBalance: null,
          final: true,
          recordRetentionMs: deps.recordRetentionMs,
        })
        .catch(() => {})
        .finally(() => deps.renewer.remove(attemptId))
      throw error
    }
    if ('admission' in call) return call
    const f = call
    // The renewer holds the attempt until its release has returned: a stop waits on it.
    await deps.steps
      .release(admission, {
        errorCode: f.code,
        cooldownMs: f.clientError || f.code === 'client_closed' ? 0 : deps.market.cooldownMs,
        upstreamBalance: f.balance,
        final: req.signal.aborted || f.clientError || n === MAX_ATTEMPTS,
        recordRetentionMs: deps.recordRetentionMs,
      })
      .finally(() => deps.renewer.remove(attemptId))
    // The released attempt is recorded: these errors carry the support reference too.
    if (req.signal.aborted) {
      throw attachSupportReference(
        new ApiError(499, 'client_closed', 'the client closed the request'),
        req.supportReference,
      )
    }
    if (f.clientError) {
      // The supplier's own text is its words, not ours: the log has it (bounded), the buyer does not.
      deps.logger.info(
        {
          requestId: req.requestId,
          offerId: admission.offerId,
          status: f.status,
          upstreamMessage: f.message,
        },
        'supplier refused the request',
      )
      throw attachSupportReference(
        new ApiError(
          400,
          'upstream_rejected',
          `the provider refused the request as invalid (status ${f.status}); check its parameters`,
        ),
        req.supportReference,
      )
    }
    deps.logger.warn(
      { requestId: req.requestId, offerId: admission.offerId, code: f.code },
      'supplier failed before any byte; falling forward',
    )
    metrics.fallForwards.inc({ code: f.code })
    failed.push(admission.offerId)
  }
  throw await noSupplier(deps, req, refusal, failed, who)
}
