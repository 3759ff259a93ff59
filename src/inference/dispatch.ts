// Dispatch: admit -> call the supplier -> on a failure before any byte, release that hold, cool
// the offer down, and admit the next cheapest offer not yet tried: up to five supplier keys.
import type Redis from 'ioredis'
import type { Logger } from 'pino'
import type { MarketConfig } from '../config.ts'
import { ApiError } from '../http/errors.ts'
import { AdmitCode, type AdmitRefusal, refusalError } from '../market/result-codes.ts'
import { type Admission, admit, release } from '../market/settlement.ts'
import type { UpstreamKeyCache } from '../market/upstream-key-crypto.ts'
import { metrics } from '../metrics/gateway-metrics.ts'
import type { MicroDiem } from '../money/units.ts'
import { DEFAULT_RECORD_RETENTION_MS, recordRefusal } from '../records/refusals.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { UpstreamResponse } from '../upstream/client.ts'
import type { AdmittedChat } from './chat-request.ts'
import { callSupplier } from './supplier.ts'
import { attachSupportReference } from './support-reference.ts'

export const MAX_SUPPLIER_KEYS = 5

export interface DispatchDeps {
  redis: Redis
  keys: Keyspace
  market: MarketConfig
  defaultMaxPriceCents: number
  upstreamKeys: UpstreamKeyCache
  upstreamTimeoutMs: number
  firstByteTimeoutMs: number
  logger: Logger
  /** How long an ended attempt is kept as its request's record. */
  recordRetentionMs?: number
}

/** What one supplier call is: the same dispatch serves chat, Responses and images. */
export interface UpstreamJob {
  modelId: string
  /** The worst case the market holds for this request. */
  burnEstimate: MicroDiem
  /** Under the supplier's base URL. */
  path: string
  body: Record<string, unknown>
  stream: boolean
  /** Whether a buffered answer is whole; a broken one falls forward. */
  isComplete: (json: Record<string, unknown>) => boolean
  /** An extra per-wallet in-flight count with its own cap (images: one at a time). */
  lane?: { name: string; cap: number }
  /** The hold's lease when it must outlive the call (video: until the job is retrieved). */
  leaseMs?: number
}

export function chatJob(chat: AdmittedChat): UpstreamJob {
  return {
    modelId: chat.model.id,
    burnEstimate: chat.burnEstimate,
    path: '/chat/completions',
    body: chat.upstreamBody,
    stream: chat.stream,
    isComplete: (json) => Array.isArray(json.choices),
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
  /** The supplier's answer; a stream's is already past its first bytes (`head`). */
  response: UpstreamResponse
  preBalance: Admission['upstreamBalance']
  /** For streams: the bytes read so far. */
  head?: Uint8Array
  /** For buffered answers: the supplier's JSON, read whole (a broken body falls forward). */
  json?: Record<string, unknown>
  /** Offer ids tried before this one (all failed before any byte). */
  failedOffers: string[]
}

const KEY_WAIT_STEP_MS = 15

async function admitWaiting(
  deps: DispatchDeps,
  req: DispatchRequest,
  requester: Requester,
  attemptId: string,
  tried: string[],
) {
  const deadline = Date.now() + deps.market.keyWaitMs
  for (;;) {
    const result = await admit(deps.redis, deps.keys, {
      attemptId,
      ...('apiKeyDigest' in requester
        ? { accountId: '', apiKeyId: '', apiKeyDigest: requester.apiKeyDigest }
        : { accountId: requester.accountId, apiKeyId: requester.apiKeyId }),
      burnEstimate: req.job.burnEstimate,
      keyCap: deps.market.keyMaxInFlight,
      walletCap: deps.market.walletMaxInFlight,
      leaseMs: req.job.leaseMs ?? deps.market.leaseMs,
      tried,
      defaultMaxPriceCents: deps.defaultMaxPriceCents,
      model: req.job.modelId,
      requestId: req.requestId,
      lane: req.job.lane,
      recordRetentionMs: deps.recordRetentionMs,
    })
    if (result.code !== AdmitCode.KeysBusy || Date.now() >= deadline || req.signal.aborted) return result
    await Bun.sleep(KEY_WAIT_STEP_MS + Math.random() * KEY_WAIT_STEP_MS)
  }
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
const RECORDED_REFUSALS = [402, 429, 503]

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
      deps.redis,
      deps.keys,
      {
        attemptId: `${req.supportReference}.${failed.length + 1}`,
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

export async function dispatch(deps: DispatchDeps, req: DispatchRequest): Promise<Dispatched> {
  const failed: string[] = []
  let refusal: AdmitRefusal | null = null
  // Known once the first admit has resolved the key; later attempts pass the ids themselves.
  let requester = req.requester
  let who = 'accountId' in requester ? requester : null
  for (let n = 1; n <= MAX_SUPPLIER_KEYS; n++) {
    const attemptId = `${req.supportReference}.${n}`
    const result = await admitWaiting(deps, req, requester, attemptId, failed)
    const resolved =
      result.code === AdmitCode.Admitted ? (result as Admission) : (result as { who?: typeof who }).who
    if (resolved) {
      who = { accountId: resolved.accountId, apiKeyId: resolved.apiKeyId }
      requester = who
    }
    if (result.code !== AdmitCode.Admitted) {
      refusal = result
      break
    }
    const admission = result as Admission
    const outcome = await callSupplier({
      baseUrl: admission.upstreamBaseUrl,
      apiKey: deps.upstreamKeys.open(admission.upstreamKeyEnc),
      path: req.job.path,
      body: req.job.body,
      stream: req.job.stream,
      signal: req.signal,
      timeoutMs: req.job.stream ? deps.firstByteTimeoutMs : deps.upstreamTimeoutMs,
    })
    let failure = outcome.ok ? null : outcome
    if (outcome.ok && req.job.stream) {
      // Nothing has gone to the client yet: a stream that dies before its first frame falls forward too.
      const head = await firstBytes(outcome.response)
      if (head)
        return {
          admission,
          response: outcome.response,
          preBalance: outcome.preBalance,
          head,
          failedOffers: failed,
        }
      outcome.response.cancel()
      failure = {
        ok: false,
        code: 'upstream_no_first_byte',
        clientError: false,
        status: null,
        message: '',
        balance: null,
      }
    } else if (outcome.ok) {
      const json = await completeBody(outcome.response, req.job)
      if (json)
        return {
          admission,
          response: outcome.response,
          preBalance: outcome.preBalance,
          json,
          failedOffers: failed,
        }
      failure = {
        ok: false,
        code: 'upstream_broken_body',
        clientError: false,
        status: null,
        message: '',
        balance: null,
      }
    }
    const f = failure!
    await release(deps.redis, deps.keys, {
      attemptId,
      errorCode: f.code,
      cooldownMs: f.clientError || f.code === 'client_closed' ? 0 : deps.market.cooldownMs,
      upstreamBalance: f.balance,
      final: req.signal.aborted || f.clientError || n === MAX_SUPPLIER_KEYS,
      recordRetentionMs: deps.recordRetentionMs,
    })
    // The released attempt is recorded: these errors carry the support reference too.
    if (req.signal.aborted) {
      throw attachSupportReference(
        new ApiError(499, 'client_closed', 'the client closed the request'),
        req.supportReference,
      )
    }
    if (f.clientError) {
      throw attachSupportReference(
        new ApiError(
          400,
          'upstream_rejected',
          `the provider refused the request: ${f.message.slice(0, 300)}`,
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
