// POST /v1/messages: Anthropic's Messages API, a facade over the same pipeline as chat (same key,
// hold, market, fall-forward, metering and cost headers). POST /v1/messages/count_tokens counts a
// prompt with the gateway's tokenizer: the key is checked, nothing is held or written.
import { Elysia } from 'elysia'
import { ApiKeyStore } from '../../accounts/key-store.ts'
import { ApiError } from '../../errors.ts'
import { type ChatBody, liveTextModel } from '../../inference/chat-request.ts'
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
import { countTokens } from '../../inference/token-count.ts'
import { type ChatMessageLike, promptFieldsOf, promptTokenCount } from '../../inference/tokens.ts'
import { buyerKeyAuth, unauthorized } from '../auth.ts'
import { type PaidHandler, sendAnswer } from './call.ts'

/** The prompt's tokens as an answer without usage is billed on them; 0 when they cannot be counted. */
const streamInputTokens = (chat: ChatBody) =>
  promptTokenCount(chat.messages as ChatMessageLike[], promptFieldsOf(chat)).catch(() => 0)

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
        if (!(await keyStore.resolve(buyerKey.apiKeyDigest))) {
          throw unauthorized('invalid_api_key', 'invalid API key')
        }
        liveTextModel(await deps.catalog.get(body.model), body.model)
        const { messages, tools } = promptOf(body)
        const counts = await Promise.all([
          promptTokenCount(messages as ChatMessageLike[]),
          tools ? countTokens(JSON.stringify(tools)) : 0,
        ]).catch(() => {
          throw new ApiError(
            503,
            'count_unavailable',
            'the tokens could not be counted in time; retry shortly',
          )
        })
        return { input_tokens: counts[0] + counts[1] }
      },
      { buyerKey: true, body: countTokensBodySchema },
    )
}
