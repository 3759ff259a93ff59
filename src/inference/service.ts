// The inference service, built once per app: the request path from a validated body to a cleared
// answer. It resolves the model and the hold's worst case, dispatches with fall-forward (every
// attempt's lease renewed from admission by its one renewer), and clears. Routes translate their
// wire shapes around it; it knows nothing of HTTP.
import type { Logger } from 'pino'
import type { CatalogStore } from '../catalog/store.ts'
import type { GatewayConfig } from '../config.ts'
import { ApiError } from '../errors.ts'
import { type ClearJournal, writtenOn } from '../market/clear-journal.ts'
import type { Clearing } from '../market/clearing.ts'
import { LeaseRenewer } from '../market/lease-renewer.ts'
import { type MarketSteps, marketSteps } from '../market/steps.ts'
import type { UnsentClears } from '../market/unsent-clears.ts'
import { UpstreamKeyCache } from '../market/upstream-key-crypto.ts'
import { formatMicros, type MicroDiem } from '../money/units.ts'
import {
  attachSupportReference,
  newSupportReference,
  SUPPORT_REFERENCE_HEADER,
} from '../records/support-reference.ts'
import { isRedisUnavailable } from '../redis/connection.ts'
import type { Keyspace } from '../redis/keys.ts'
import { ReplicaBarrier } from '../redis/replica-barrier.ts'
import type { Store } from '../redis/store.ts'
import { type ChatBody, liveTextModel, type ValidChat, validateChat } from './chat-request.ts'
import { type ClearDeps, type ClearedUsage, clearBurn } from './clear-usage.ts'
import {
  chatJob,
  type DispatchDeps,
  type Dispatched,
  dispatch,
  type Requester,
  type UpstreamJob,
} from './dispatch.ts'
import { type ImageBody, validateImages } from './image-request.ts'
import { type BufferedResult, costHeaders, relayBuffered } from './relay-buffered.ts'
import type { StreamContext, StreamTiming } from './relay-stream.ts'
import { type ChatMessageLike, promptFieldsOf } from './tokens.ts'

export interface InferenceDeps {
  store: Store
  keys: Keyspace
  catalog: CatalogStore
  config: GatewayConfig
  logger: Logger
  /** The market's steps (default: those of `keys`' layout). */
  steps?: MarketSteps
  /** Acknowledged clears kept to be sent again when a connection to Redis closes. */
  journal?: ClearJournal
  /** The clears of delivered answers the store never answered, sent again later. */
  unsent?: UnsentClears
  /** The leases' renewer (default: one of the service's own), shared with the replica's drain. */
  renewer?: LeaseRenewer
}

/** One request as the service needs it: its ids and the signal that says the client left. */
export interface InferenceCall {
  requestId: string
  supportReference: string
  signal: AbortSignal
}

/** A call with a fresh support reference: the name its attempts are recorded under. */
export function inferenceCall(requestId: string, signal: AbortSignal): InferenceCall {
  return { requestId, supportReference: newSupportReference(), signal }
}

/** A chat on its way: admitted and dispatched to a supplier that answered. */
export interface Begun {
  call: InferenceCall
  chat: ValidChat
  messages: ChatMessageLike[]
  dispatched: Dispatched
}

/** A chat's wire format (chat, Responses, Messages): how its answer is written, buffered or streamed. */
export interface ChatFormat {
  /**
   * The buffered answer, read from the supplier's chat completion before the clear (where what
   * cannot be written in this format is refused with nothing charged), then written with the
   * answer as relayed and what the clear charged: nothing in that last step may refuse.
   */
  buffered(
    chat: Record<string, unknown>,
  ): (relayed: Record<string, unknown>, clearing: ClearedUsage) => unknown
  /** The streamed answer: the relay, in this format, of the supplier's stream. */
  stream(context: StreamContext): ReadableStream<Uint8Array>
}

/** What a route sends for a chat: the body (JSON text or a stream) and its headers. */
export interface ChatAnswer {
  body: string | ReadableStream<Uint8Array>
  headers: Record<string, string>
  /** What the request was charged, for its log line; null for a stream (it logs its own end). */
  costUsdc: string | null
}

const JSON_CONTENT_TYPE = 'application/json'
const STREAM_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' }

/** One image per account in flight, always. */
export const IMAGE_CAP_GROUP = { name: 'img', cap: 1 }

/**
 * The error for a buffered answer whose clear failed. The clear raised an error: the contract's
 * 500 settle_failed, nothing charged. The store went away under it: a 503 store_unavailable like
 * every other call made while Redis is unreachable; whether a clear sent just before committed is
 * not known here, and the request's record says it once Redis is back.
 */
export function clearFailure(error: unknown, supportReference: string): ApiError {
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

export class InferenceService {
  /** Every step of an attempt against the store, in the market's layout. */
  readonly steps: MarketSteps
  /** Renews every in-flight attempt's lease from admission until it is cleared or released. */
  readonly renewer: LeaseRenewer
  readonly dispatching: DispatchDeps
  readonly clearDeps: ClearDeps & { logger: Logger; renewer: LeaseRenewer; cooldownMs: number }
  readonly timing: StreamTiming

  constructor(readonly deps: InferenceDeps) {
    const { inference, market } = deps.config
    const recordRetentionMs = deps.config.records.recordRetentionDays * 86_400_000
    this.steps = deps.steps ?? marketSteps(deps.store, deps.keys)
    this.renewer = deps.renewer ?? new LeaseRenewer(this.steps, market.leaseMs, market.every)
    this.dispatching = {
      store: deps.store,
      steps: this.steps,
      market,
      defaultMaxPriceCents: deps.config.defaultMaxPriceCents,
      upstreamKeys: new UpstreamKeyCache(deps.config.masterKey),
      upstreamTimeoutMs: inference.upstreamTimeoutMs,
      firstByteTimeoutMs: inference.firstByteTimeoutMs,
      maxBodyBytes: inference.maxUpstreamBodyBytes,
      maxFrameBytes: inference.maxUpstreamFrameBytes,
      maxStreamBytes: inference.maxUpstreamStreamBytes,
      logger: deps.logger,
      renewer: this.renewer,
      recordRetentionMs,
    }
    this.clearDeps = {
      steps: this.steps,
      journal: deps.journal,
      unsent: deps.unsent,
      writtenOn: (attempt) => writtenOn(deps.store, this.steps.clearSlots(attempt)),
      ...(market.clearReplicas > 0
        ? {
            barrier: new ReplicaBarrier(
              deps.store,
              market.clearReplicas,
              market.clearReplicasWaitMs,
              deps.logger,
            ),
          }
        : {}),
      feeBps: market.feeBps,
      recordRetentionMs,
      logger: deps.logger,
      renewer: this.renewer,
      cooldownMs: market.cooldownMs,
    }
    this.timing = {
      keepAliveMs: inference.keepAliveMs,
      idleMs: inference.streamIdleMs,
      maxMs: inference.streamMaxMs,
      leaseMs: market.leaseMs,
      clearWaitMs: inference.streamClearWaitMs,
    }
  }

  /**
   * Dispatches a job with fall-forward. Errors carry the support reference already when an attempt
   * was recorded. The client leaving aborts the supplier call through the call's signal.
   */
  dispatch(call: InferenceCall, requester: Requester, job: UpstreamJob): Promise<Dispatched> {
    return dispatch(this.dispatching, { requester, ...call, job })
  }

  private async beginChat(body: ChatBody, requester: Requester, call: InferenceCall): Promise<Begun> {
    const model = liveTextModel(await this.deps.catalog.get(body.model), body.model)
    const job = chatJob(validateChat(body, model, this.deps.config.inference.defaultMaxTokens))
    const dispatched = await this.dispatch(call, requester, job)
    // The chat as admitted: its token limit fitted to the balance when it named none.
    return { call, chat: dispatched.job.chat!, messages: body.messages as ChatMessageLike[], dispatched }
  }

  /**
   * Runs a chat to its end, the one owner of its attempt: admitted and dispatched, then its format
   * made (`format`, which may refuse what the admitted chat cannot be written as), then cleared and
   * written (buffered) or handed to the stream relay, which owns its own end. Anything thrown after
   * admission and before the clear or the relay releases the attempt: no lease renewed for ever,
   * no hold left.
   */
  async answerChat(
    body: ChatBody,
    requester: Requester,
    call: InferenceCall,
    format: (begun: Begun) => ChatFormat,
  ): Promise<ChatAnswer> {
    const begun = await this.beginChat(body, requester, call)
    const reference = { [SUPPORT_REFERENCE_HEADER]: call.supportReference }
    let written: ChatFormat
    try {
      written = format(begun)
    } catch (error) {
      await this.abandon(begun, error)
      throw error
    }
    if (begun.chat.stream) {
      const context = this.streamContext(begun)
      let stream: ReadableStream<Uint8Array>
      try {
        stream = written.stream(context)
      } catch (error) {
        await this.abandon(begun, error)
        throw error
      }
      return { body: stream, headers: { ...STREAM_HEADERS, ...reference }, costUsdc: null }
    }
    let write: ReturnType<ChatFormat['buffered']>
    try {
      write = written.buffered(begun.dispatched.json!)
    } catch (error) {
      await this.abandon(begun, error)
      throw error
    }
    const { body: chat, clearing } = await this.clearBuffered(begun)
    const headers = costHeaders(clearing)
    headers['content-type'] = JSON_CONTENT_TYPE
    headers[SUPPORT_REFERENCE_HEADER] = call.supportReference
    return {
      body: JSON.stringify(write(chat, clearing)),
      headers,
      costUsdc: headers['x-svc-cost-usdc']!,
    }
  }

  /**
   * Ends an admitted attempt that will not be cleared: the supplier's answer dropped, the lease no
   * longer renewed, the hold released with nothing charged. Released by the reaper instead when the
   * store is away now.
   */
  private async abandon(begun: Begun, cause: unknown): Promise<void> {
    const { attemptId } = begun.dispatched.admission
    begun.dispatched.response.cancel()
    this.deps.logger.error(
      { requestId: begun.call.requestId, err: (cause as Error)?.message },
      'chat abandoned',
    )
    await this.steps
      .release(begun.dispatched.admission, {
        errorCode: 'gateway_error',
        cooldownMs: 0,
        upstreamBalance: null,
        final: true,
        recordRetentionMs: this.clearDeps.recordRetentionMs,
      })
      .catch((error: Error) => {
        this.deps.logger.warn(
          { requestId: begun.call.requestId, err: error.message },
          'abandoned attempt left to the reaper',
        )
      })
      .finally(() => this.renewer.remove(attemptId))
  }

  /** Clears a buffered answer, or throws clearFailure's error. */
  private async clearBuffered(begun: Begun): Promise<BufferedResult> {
    try {
      return await relayBuffered(
        this.clearDeps,
        begun.chat,
        begun.messages,
        begun.dispatched,
        begun.call.requestId,
      )
    } catch (error) {
      throw clearFailure(error, begun.call.supportReference)
    } finally {
      this.renewer.remove(begun.dispatched.admission.attemptId)
    }
  }

  /** What a stream relay needs from a begun chat. */
  private streamContext(begun: Begun): StreamContext {
    // The log line's closure holds these, not the request: that is freed while the stream runs.
    const { logger } = this.deps
    const { requestId, supportReference } = begun.call
    return {
      deps: this.clearDeps,
      timing: this.timing,
      // Only what clearing reads: the supplier's body (every field the client sent) is not kept.
      chat: {
        model: begun.chat.model,
        maxTokens: begun.chat.maxTokens,
        choices: begun.chat.choices,
        promptTokenBound: begun.chat.promptTokenBound,
      },
      messages: begun.messages,
      // Only the prompt fields of the supplier's body, for an estimate: the rest is let go.
      promptFields: promptFieldsOf(begun.chat.upstreamBody),
      dispatched: begun.dispatched,
      requestId,
      supportReference,
      onFinish: ({ clearing, error }) => {
        logger.info(
          {
            requestId,
            supportReference,
            costUsdc: clearing ? formatMicros(clearing.charged) : null,
            streamError: error,
          },
          'stream cleared',
        )
      },
    }
  }

  /** Images, held at the per-image price (flat, or the tier named) x n and cleared for the images delivered. */
  async generateImages(
    body: ImageBody,
    requester: Requester,
    call: InferenceCall,
  ): Promise<{ created: unknown; data: unknown[]; clearing: Clearing }> {
    const images = validateImages(body, await this.deps.catalog.get(body.model))
    const dispatched = await this.dispatch(call, requester, {
      modelId: images.modelId,
      holdDiem: images.holdDiem,
      path: images.path,
      body: images.upstreamBody,
      stream: false,
      isComplete: (json) => images.read(json) !== null,
      // An answer with no image in it delivered nothing: not paid for, the next offer is tried.
      delivered: (json) => (images.read(json)?.length ?? 0) > 0,
      capGroup: IMAGE_CAP_GROUP,
    })
    const json = dispatched.json!
    // The buyer pays for the images delivered, never more than were asked for.
    const data = (images.read(json) ?? []).slice(0, images.count)
    const delivered = data.length
    try {
      const clearing = await clearBurn(
        this.clearDeps,
        dispatched.admission,
        dispatched.preBalance ?? dispatched.admission.upstreamBalance,
        (images.perImage * delivered) as MicroDiem,
        { inputTokens: 0, outputTokens: delivered, estimated: false, outcome: 'completed' },
      )
      return { created: json.created ?? Math.floor(Date.now() / 1000), data, clearing }
    } catch (error) {
      throw clearFailure(error, call.supportReference)
    } finally {
      this.renewer.remove(dispatched.admission.attemptId)
    }
  }
}
