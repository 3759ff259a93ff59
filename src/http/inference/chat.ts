// POST /v1/chat/completions: thin. Validate, admit the model and its limits, dispatch with
// fall-forward, then relay buffered or streamed; the services below know nothing of Elysia.
import { Elysia } from 'elysia'
import type Redis from 'ioredis'
import type { Logger } from 'pino'
import type { CatalogStore } from '../../catalog/store.ts'
import type { GatewayConfig } from '../../config.ts'
import { admitChat, chatBodySchema, liveTextModel } from '../../inference/chat-request.ts'
import { type DispatchDeps, dispatch } from '../../inference/dispatch.ts'
import { costHeaders, relayBuffered } from '../../inference/relay-buffered.ts'
import { relayChatStream } from '../../inference/relay-stream.ts'
import { newSupportReference } from '../../inference/support-reference.ts'
import type { ChatMessageLike } from '../../inference/tokens.ts'
import { UpstreamKeyCache } from '../../market/upstream-key-crypto.ts'
import { formatMicros } from '../../money/units.ts'
import type { Keyspace } from '../../redis/keys.ts'
import { buyerAuth } from '../auth.ts'
import { ApiError } from '../errors.ts'
import { requestContext } from '../request-context.ts'

export interface InferenceDeps {
  redis: Redis
  keys: Keyspace
  catalog: CatalogStore
  config: GatewayConfig
  logger: Logger
}

export const SUPPORT_REFERENCE_HEADER = 'x-svc-support-reference'

export function dispatchDeps(deps: InferenceDeps): DispatchDeps {
  return {
    redis: deps.redis,
    keys: deps.keys,
    market: deps.config.market,
    defaultMaxPriceCents: deps.config.defaultMaxPriceCents,
    upstreamKeys: new UpstreamKeyCache(deps.config.masterKey),
    upstreamTimeoutMs: deps.config.inference.upstreamTimeoutMs,
    firstByteTimeoutMs: deps.config.inference.firstByteTimeoutMs,
    logger: deps.logger,
  }
}

/** Attaches the support reference to an error that followed a recorded attempt. */
export function withSupportReference(error: unknown, supportReference: string, recorded: boolean): unknown {
  if (!(error instanceof ApiError) || !recorded) return error
  error.headers[SUPPORT_REFERENCE_HEADER] = supportReference
  error.extra.supportReference = supportReference
  return error
}

export function chatRoutes(deps: InferenceDeps) {
  const dispatching = dispatchDeps(deps)
  const settling = {
    redis: deps.redis,
    keys: deps.keys,
    feeBps: deps.config.market.feeBps,
    logger: deps.logger,
  }
  const { inference, market } = deps.config
  const timing = {
    keepAliveMs: inference.keepAliveMs,
    idleMs: inference.streamIdleMs,
    leaseMs: market.leaseMs,
  }

  return new Elysia({ name: 'svc/chat', seed: deps.keys.prefix }).use(buyerAuth(deps)).post(
    '/v1/chat/completions',
    async ({ body, buyer, request }) => {
      const context = requestContext(request)
      const model = liveTextModel(await deps.catalog.get(body.model), body.model)
      const chat = admitChat(body, model, inference.defaultMaxTokens)
      const supportReference = newSupportReference()
      context.supportReference = supportReference
      const messages = body.messages as ChatMessageLike[]

      // The supplier call ends when the client goes away (or the relay gives up on it).
      const upstream = new AbortController()
      request.signal.addEventListener('abort', () => upstream.abort(), { once: true })
      let dispatched: Awaited<ReturnType<typeof dispatch>>
      try {
        dispatched = await dispatch(dispatching, {
          accountId: buyer.accountId,
          apiKeyId: buyer.keyId,
          requestId: context.id,
          supportReference,
          chat,
          signal: upstream.signal,
        })
      } catch (error) {
        throw withSupportReference(error, supportReference, (error as ApiError).status === 502)
      }

      if (!chat.stream) {
        let result: Awaited<ReturnType<typeof relayBuffered>>
        try {
          result = await relayBuffered(settling, chat, messages, dispatched, context.id)
        } catch {
          throw withSupportReference(
            new ApiError(
              500,
              'settle_failed',
              'settlement did not commit; nothing was charged; safe to retry',
            ),
            supportReference,
            true,
          )
        }
        context.costUsdc = formatMicros(result.settlement.charged)
        return new Response(JSON.stringify(result.body), {
          headers: {
            'content-type': 'application/json',
            [SUPPORT_REFERENCE_HEADER]: supportReference,
            ...costHeaders(result.settlement),
          },
        })
      }

      const stream = relayChatStream({
        deps: settling,
        timing,
        chat,
        messages,
        dispatched,
        requestId: context.id,
        supportReference,
        abortUpstream: () => upstream.abort(),
        onFinish: ({ settlement, error }) => {
          deps.logger.info(
            {
              requestId: context.id,
              supportReference,
              costUsdc: settlement ? formatMicros(settlement.charged) : null,
              streamError: error,
            },
            'stream settled',
          )
        },
      })
      // Cost and balance headers are not sent: the head goes out before the relay.
      return new Response(stream, {
        headers: {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          [SUPPORT_REFERENCE_HEADER]: supportReference,
        },
      })
    },
    { buyer: true, body: chatBodySchema },
  )
}
