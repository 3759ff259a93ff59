// POST /v1/responses: the stateless Responses facade over the same pipeline as chat. GET
// /v1/responses and GET /v1/responses/{id} answer 404: nothing is stored.
import { Elysia } from 'elysia'
import { notFound } from '../../errors.ts'
import { costHeaders } from '../../inference/relay-buffered.ts'
import { relayResponsesStream } from '../../inference/relay-responses.ts'
import {
  incompleteReason,
  outputItems,
  responseObject,
  responsesUsage,
} from '../../inference/responses-object.ts'
import { responseShape, responsesBodySchema, responsesToChat } from '../../inference/responses-request.ts'
import type { InferenceService } from '../../inference/service.ts'
import { formatMicros } from '../../money/units.ts'
import { SUPPORT_REFERENCE_HEADER } from '../../records/support-reference.ts'
import { buyerKeyAuth } from '../auth.ts'
import { ownResponse } from '../own-response.ts'
import { callOf, noteCost } from './call.ts'

const notStored = () => {
  throw notFound('responses are not stored; this endpoint is stateless', 'not_found')
}

const finishReason = (chat: Record<string, unknown>) =>
  (chat.choices as { finish_reason?: unknown }[] | undefined)?.[0]?.finish_reason

export function responsesRoutes(service: InferenceService) {
  const { deps } = service
  return new Elysia({ name: 'svc/responses', seed: deps.keys.prefix })
    .use(buyerKeyAuth(deps))
    .get('/v1/responses', notStored)
    .get('/v1/responses/:id', notStored)
    .post(
      '/v1/responses',
      async ({ body, buyerKey, request, set }) => {
        // A field that cannot be honoured is refused here, before anything is held.
        const translated = responsesToChat(body)
        const begun = await service.beginChat(translated.chat, buyerKey, callOf(request))
        const shape = responseShape(body, translated, begun.chat.model.id, begun.call.requestId)
        if (!begun.chat.stream) {
          const { body: chat, clearing } = await service.clearBuffered(begun)
          noteCost(request, formatMicros(clearing.charged))
          const reason = incompleteReason(finishReason(chat))
          const status = reason ? 'incomplete' : 'completed'
          const response = responseObject(
            shape,
            status,
            outputItems(shape, chat, status),
            responsesUsage(clearing.usage, chat.usage),
            reason,
          )
          return ownResponse(set, JSON.stringify(response), {
            'content-type': 'application/json',
            [SUPPORT_REFERENCE_HEADER]: begun.call.supportReference,
            ...costHeaders(clearing),
          })
        }
        return ownResponse(set, relayResponsesStream(service.streamContext(begun), shape), {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          [SUPPORT_REFERENCE_HEADER]: begun.call.supportReference,
        })
      },
      { buyerKey: true, body: responsesBodySchema },
    )
}
