// POST /v1/messages: Anthropic's Messages API, a facade over the same pipeline as chat (same key,
// hold, market, fall-forward, metering and cost headers). POST /v1/messages/count_tokens counts a
// prompt with the gateway's tokenizer: the key is checked, nothing is held or written; the counts
// are free, so they wait aside (behind every count a charge depends on) and each wallet has a few
// in flight at most in this process.
import { Elysia } from 'elysia'
import { ApiKeyStore } from '../../accounts/key-store.ts'
import { ApiError, retryAfter } from '../../errors.ts'
import { type ChatBody, liveTextModel } from '../../inference/chat-request.ts'
import { InFlightCounts } from '../../inference/in-flight.ts'
import { messageContent, messageObject, messagesUsage } from '../../inference/messages-object.ts'
import {
  checkCapabilities,
  countTokensBodySchema,
  type MessagesBody,
  messagesBodySchema,
  messagesToChat,
  promptOf,
} from '../../inference/messages-request.ts'
import { relayMessagesStream } from '../../inference/relay-messages.ts'
import type { ChatFormat, InferenceService } from '../../inference/service.ts'
import { countTokensAside } from '../../inference/token-count.ts'
import { type ChatMessageLike, promptFieldsOf, promptTokenCount } from '../../inference/tokens.ts'
import { buyerKeyAuth, unauthorized } from '../auth.ts'
import { type PaidHandler, sendAnswer } from './call.ts'

/**
 * The prompt's tokens for a stream's message_start, as count_tokens counts them; 0 when they cannot
 * be counted. No charge depends on it (the clear counts on its own), so it is an aside count: a burst
 * of streams never queues ahead of a count a charge depends on.
 */
const streamInputTokens = (chat: ChatBody) =>
  promptTokenCount(chat.messages as ChatMessageLike[], promptFieldsOf(chat), countTokensAside).catch(() => 0)

/** count_tokens calls of one wallet in flight at once in this process; past it a 429. */
export const COUNTS_IN_FLIGHT = 4

const countsInFlight = new InFlightCounts()

export const messagesHandler =
  (service: InferenceService): PaidHandler<MessagesBody> =>
  async ({ body, buyerKey, request, set }) => {
    // A field that cannot be honoured, by the facade or by the model, is refused before any hold.
    const translated = messagesToChat(body)
    // Counted off the main thread while the request is admitted, for a stream's message_start.
    const inputTokens = body.stream === true ? streamInputTokens(translated.chat) : Promise.resolve(0)
    const entry = await service.deps.catalog.get(body.model)
    if (entry) checkCapabilities(translated.needs, entry)
    return sendAnswer(request, set, (call) =>
      service.answerChat(translated.chat, buyerKey, call, (begun): ChatFormat => {
        const shape = {
          id: `msg_${begun.call.requestId.slice(4)}`,
          model: begun.chat.model.id,
          stopSequences: translated.stopSequences,
        }
        return {
          buffered: (chat) => {
            const { content, ...stop } = messageContent(shape, chat)
            return (_, clearing) => messageObject(shape, content, stop, messagesUsage(clearing.usage))
          },
          stream: (context) => relayMessagesStream(context, shape, inputTokens),
        }
      }),
    )
  }

export function messagesRoutes(service: InferenceService) {
  const { deps } = service
  const keyStore = new ApiKeyStore(deps.store, deps.keys)
  return new Elysia({ name: 'svc/messages', seed: deps.keys.prefix })
    .use(buyerKeyAuth(deps))
    .post('/v1/messages', messagesHandler(service), { buyerKey: true, body: messagesBodySchema })
    .post(
      '/v1/messages/count_tokens',
      async ({ body, buyerKey }) => {
        // Read only: a count is not a use of the key, so not even its lastUsedAt is written.
        const key = await keyStore.resolve(buyerKey.apiKeyDigest)
        if (!key) throw unauthorized('invalid_api_key', 'invalid API key')
        liveTextModel(await deps.catalog.get(body.model), body.model)
        const { messages, fields } = promptOf(body)
        if (!countsInFlight.enter(key.accountId, COUNTS_IN_FLIGHT)) {
          throw new ApiError(
            429,
            'count_concurrency_limit',
            `at most ${COUNTS_IN_FLIGHT} token counts in flight per wallet; wait Retry-After seconds`,
            { headers: retryAfter(1) },
          )
        }
        try {
          return {
            input_tokens: await promptTokenCount(messages as ChatMessageLike[], fields, countTokensAside),
          }
        } catch {
          throw new ApiError(
            503,
            'count_unavailable',
            'the tokens could not be counted in time; retry shortly',
            {
              headers: retryAfter(1),
            },
          )
        } finally {
          countsInFlight.leave(key.accountId)
        }
      },
      { buyerKey: true, body: countTokensBodySchema },
    )
}
