// POST /v1/responses: the stateless Responses facade over the same pipeline as chat. GET
// /v1/responses and GET /v1/responses/{id} answer 404: nothing is stored.
import { Elysia } from 'elysia'
import { ApiError, badRequest, notFound } from '../../errors.ts'
import { relayResponsesStream } from '../../inference/relay-responses.ts'
import {
  incompleteReason,
  outputItems,
  responseObject,
  responsesUsage,
} from '../../inference/responses-object.ts'
import {
  type ResponsesBody,
  responseShape,
  responsesBodySchema,
  responsesToChat,
} from '../../inference/responses-request.ts'
import type { ChatFormat, InferenceService } from '../../inference/service.ts'
import { buyerKeyAuth } from '../auth.ts'
import { type PaidHandler, sendAnswer } from './call.ts'

const notStored = () => {
  throw notFound('responses are not stored; this endpoint is stateless', 'not_found')
}

const finishReason = (chat: Record<string, unknown>) =>
  (chat.choices as { finish_reason?: unknown }[] | undefined)?.[0]?.finish_reason

/** The chat limit's refusal named as the field this request sent: max_output_tokens. */
const inResponsesTerms = (error: unknown): never => {
  if (error instanceof ApiError && error.code === 'max_tokens_too_large') {
    throw badRequest(error.message.replace(/^max_tokens\b/, 'max_output_tokens'), error.code)
  }
  throw error
}

export const responsesHandler =
  (service: InferenceService): PaidHandler<ResponsesBody> =>
  ({ body, buyerKey, request, set }) => {
    // A field that cannot be honoured is refused here, before anything is held.
    const translated = responsesToChat(body)
    return sendAnswer(request, set, (call) =>
      service
        .answerChat(translated.chat, buyerKey, call, (begun): ChatFormat => {
          const shape = responseShape(body, translated, begun.chat.model.id, begun.call.requestId)
          return {
            buffered: (chat) => {
              const reason = incompleteReason(finishReason(chat))
              const status = reason ? 'incomplete' : 'completed'
              const output = outputItems(shape, chat, status)
              return (relayed, clearing) =>
                responseObject(shape, status, output, responsesUsage(clearing.usage, relayed.usage), reason)
            },
            stream: (context) => relayResponsesStream(context, shape),
          }
        })
        .catch(inResponsesTerms),
    )
  }

export function responsesRoutes(service: InferenceService) {
  return new Elysia({ name: 'svc/responses', seed: service.deps.keys.prefix })
    .use(buyerKeyAuth(service.deps))
    .get('/v1/responses', notStored)
    .get('/v1/responses/:id', notStored)
    .post('/v1/responses', responsesHandler(service), { buyerKey: true, body: responsesBodySchema })
}
