// POST /v1/responses: the stateless Responses facade over the same pipeline as chat. GET
// /v1/responses and GET /v1/responses/{id} answer 404: nothing is stored.
import { Elysia } from 'elysia'
import { costHeaders } from '../../inference/relay-buffered.ts'
import { relayResponsesStream } from '../../inference/relay-responses.ts'
import {
  messageItem,
  responseObject,
  responseShape,
  responsesBodySchema,
  responsesToChat,
} from '../../inference/responses-request.ts'
import { buyerKeyAuth } from '../auth.ts'
import { notFound } from '../errors.ts'
import { ownResponse } from '../own-response.ts'
import {
  beginInference,
  type InferenceDeps,
  inferencePipeline,
  SUPPORT_REFERENCE_HEADER,
  settleBuffered,
  streamContext,
} from './pipeline.ts'

const notStored = () => {
  throw notFound('responses are not stored; this endpoint is stateless', 'not_found')
}

function answerText(chat: Record<string, unknown>): string {
  const choice = (chat.choices as { message?: { content?: unknown } }[] | undefined)?.[0]
  return typeof choice?.message?.content === 'string' ? choice.message.content : ''
}

export function responsesRoutes(deps: InferenceDeps) {
  const pipeline = inferencePipeline(deps)
  return new Elysia({ name: 'svc/responses', seed: deps.keys.prefix })
    .use(buyerKeyAuth(deps))
    .get('/v1/responses', notStored)
    .get('/v1/responses/:id', notStored)
    .post(
      '/v1/responses',
      async ({ body, buyerKey, request, set }) => {
        const begun = await beginInference(pipeline, responsesToChat(body), buyerKey, request)
        const shape = responseShape(body, begun.chat.model.id, begun.context.id)
        if (!begun.chat.stream) {
          const { body: chat, settlement } = await settleBuffered(pipeline, begun)
          const usage = {
            input_tokens: settlement.usage.promptTokens,
            output_tokens: settlement.usage.completionTokens,
          }
          const response = responseObject(
            shape,
            'completed',
            [messageItem(shape, answerText(chat), 'completed')],
            usage,
          )
          return ownResponse(set, JSON.stringify(response), {
            'content-type': 'application/json',
            [SUPPORT_REFERENCE_HEADER]: begun.supportReference,
            ...costHeaders(settlement),
          })
        }
        return ownResponse(set, relayResponsesStream(streamContext(pipeline, begun), shape), {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          [SUPPORT_REFERENCE_HEADER]: begun.supportReference,
        })
      },
      { buyerKey: true, body: responsesBodySchema },
    )
}
