// The steps every text inference route shares, chat and Responses alike: resolve the model, admit
// the request's limits, dispatch with fall-forward, and settle a buffered answer. Routes only
// translate their own request and response shapes around these.
import type Redis from 'ioredis'
import type { Logger } from 'pino'
import type { CatalogStore } from '../../catalog/store.ts'
import type { GatewayConfig } from '../../config.ts'
import { type AdmittedChat, admitChat, type ChatBody, liveTextModel } from '../../inference/chat-request.ts'
import {
  chatJob,
  type DispatchDeps,
  type Dispatched,
  dispatch,
  type Requester,
  type UpstreamJob,
} from '../../inference/dispatch.ts'
import { type BufferedResult, relayBuffered } from '../../inference/relay-buffered.ts'
import type { StreamContext, StreamTiming } from '../../inference/relay-stream.ts'
import type { SettleDeps } from '../../inference/settle.ts'
import { attachSupportReference, newSupportReference } from '../../inference/support-reference.ts'
import type { ChatMessageLike } from '../../inference/tokens.ts'
import { LeaseRenewer } from '../../market/lease-renewer.ts'
import { UpstreamKeyCache } from '../../market/upstream-key-crypto.ts'
import { formatMicros } from '../../money/units.ts'
import { isRedisUnavailable } from '../../redis/connection.ts'
import type { Keyspace } from '../../redis/keys.ts'
import { ApiError } from '../errors.ts'
import { type RequestContext, requestContext } from '../request-context.ts'

export interface InferenceDeps {
  redis: Redis
  keys: Keyspace
  catalog: CatalogStore
  config: GatewayConfig
  logger: Logger
}

export { SUPPORT_REFERENCE_HEADER } from '../../inference/support-reference.ts'

export interface Pipeline {
  deps: InferenceDeps
  dispatching: DispatchDeps
  settling: SettleDeps & { logger: Logger; renewer: LeaseRenewer }
  timing: StreamTiming
}

export function inferencePipeline(deps: InferenceDeps): Pipeline {
  const { inference, market } = deps.config
  const recordRetentionMs = deps.config.records.recordRetentionDays * 86_400_000
  return {
    deps,
    dispatching: {
      redis: deps.redis,
      keys: deps.keys,
      market,
      defaultMaxPriceCents: deps.config.defaultMaxPriceCents,
      upstreamKeys: new UpstreamKeyCache(deps.config.masterKey),
      upstreamTimeoutMs: inference.upstreamTimeoutMs,
      firstByteTimeoutMs: inference.firstByteTimeoutMs,
      logger: deps.logger,
      recordRetentionMs,
    },
    settling: {
      redis: deps.redis,
      keys: deps.keys,
      feeBps: market.feeBps,
      recordRetentionMs,
      logger: deps.logger,
      renewer: new LeaseRenewer(deps.redis, deps.keys, market.leaseMs),
    },
    timing: { keepAliveMs: inference.keepAliveMs, idleMs: inference.streamIdleMs, leaseMs: market.leaseMs },
  }
}

/** A request on its way: admitted, dispatched to a supplier that answered. */
export interface Begun {
  context: RequestContext
  chat: AdmittedChat
  messages: ChatMessageLike[]
  supportReference: string
  dispatched: Dispatched
}

export async function beginInference(
  p: Pipeline,
  body: ChatBody,
  requester: Requester,
  request: Request,
): Promise<Begun> {
  const model = liveTextModel(await p.deps.catalog.get(body.model), body.model)
  const chat = admitChat(body, model, p.deps.config.inference.defaultMaxTokens)
  // The client leaving aborts the supplier call through the request's signal; once a stream is
  // relayed, the relay ends the call itself by cancelling the supplier's body.
  const { context, supportReference, dispatched } = await dispatchFor(p, requester, request, chatJob(chat))
  const messages = body.messages as ChatMessageLike[]
  return { context, chat, messages, supportReference, dispatched }
}

/**
 * Gives a request its support reference and dispatches its job with fall-forward. Errors carry
 * the support reference already when an attempt was recorded.
 */
export async function dispatchFor(
  p: Pipeline,
  requester: Requester,
  request: Request,
  job: UpstreamJob,
  signal = request.signal,
) {
  const context = requestContext(request)
  const supportReference = newSupportReference()
  context.supportReference = supportReference
  const dispatched = await dispatch(p.dispatching, {
    requester,
    requestId: context.id,
    supportReference,
    job,
    signal,
  })
  return { context, supportReference, dispatched }
}

/**
 * The error for a buffered answer whose clear failed. The clear raised an error: the contract's
 * 500 settle_failed, nothing charged. The store went away under it: a 503 store_unavailable like
 * every other call made while Redis is unreachable; whether a clear sent just before committed is
 * not known here, and the request's record says it once Redis is back.
 */
export function settleFailure(error: unknown, supportReference: string): ApiError {
  const failure = isRedisUnavailable(error)
    ? new ApiError(
        503,
        'store_unavailable',
        "the gateway lost its store while settling; the request's record says whether it was charged; retry shortly",
        { headers: { 'retry-after': '1' } },
      )
    : new ApiError(500, 'settle_failed', 'settlement did not commit; nothing was charged; safe to retry')
  return attachSupportReference(failure, supportReference)
}

/** Settles a buffered answer, or throws settleFailure's error. */
export async function settleBuffered(p: Pipeline, begun: Begun): Promise<BufferedResult> {
  try {
    const result = await relayBuffered(
      p.settling,
      begun.chat,
      begun.messages,
      begun.dispatched,
      begun.context.id,
    )
    begun.context.costUsdc = formatMicros(result.settlement.charged)
    return result
  } catch (error) {
    throw settleFailure(error, begun.supportReference)
  }
}

/** What a stream relay needs from a begun request. */
export function streamContext(p: Pipeline, begun: Begun): StreamContext {
  // The log line's closure holds these three, not the request: that is freed while the stream runs.
  const { logger } = p.deps
  const requestId = begun.context.id
  const { supportReference } = begun
  return {
    deps: p.settling,
    timing: p.timing,
    // Only what settling reads: the supplier's body (every field the client sent) is not kept.
    chat: { model: begun.chat.model, maxTokens: begun.chat.maxTokens },
    messages: begun.messages,
    dispatched: begun.dispatched,
    requestId: begun.context.id,
    supportReference: begun.supportReference,
    onFinish: ({ settlement, error }) => {
      logger.info(
        {
          requestId,
          supportReference,
          costUsdc: settlement ? formatMicros(settlement.charged) : null,
          streamError: error,
        },
        'stream settled',
      )
    },
  }
}
