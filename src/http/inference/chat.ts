// POST /v1/chat/completions: thin. The inference service admits, dispatches, clears and writes the
// answer in the chat format; this route only sends it.
import { Elysia } from 'elysia'
import { checkChatRequest } from '../../inference/chat-checks.ts'
import { type ChatBody, chatBodySchema } from '../../inference/chat-request.ts'
import { billedChatUsage } from '../../inference/chat-usage.ts'
import { relayChatStream } from '../../inference/relay-chat-stream.ts'
import type { ChatFormat, InferenceService } from '../../inference/service.ts'
import { buyerKeyAuth } from '../auth.ts'
import { type PaidHandler, sendAnswer } from './call.ts'

/**
 * Chat completions as the supplier wrote them (our ids and model on them, its usage as billed), or
 * its stream. An answer without usage is sent without.
 */
const CHAT_FORMAT: ChatFormat = {
  buffered: () => (relayed, clearing) => {
    // In place, as the relay rewrites the rest; an undefined usage is not serialised.
    relayed.usage = billedChatUsage(relayed.usage, clearing.usage)
    return relayed
  },
  stream: (context) => relayChatStream(context),
}

export const chatHandler =
  (service: InferenceService): PaidHandler<ChatBody> =>
  ({ body, buyerKey, request, set }) => {
    // What OpenAI would refuse is refused here, before anything is held.
    checkChatRequest(body)
    return sendAnswer(request, set, (call) => service.answerChat(body, buyerKey, call, () => CHAT_FORMAT))
  }

export function chatRoutes(service: InferenceService) {
  return new Elysia({ name: 'svc/chat', seed: service.deps.keys.prefix })
    .use(buyerKeyAuth(service.deps))
    .post('/v1/chat/completions', chatHandler(service), { buyerKey: true, body: chatBodySchema })
}
