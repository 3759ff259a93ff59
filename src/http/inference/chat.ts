// POST /v1/chat/completions: thin. The shared pipeline admits, dispatches and settles; this route
// only shapes the chat answer, buffered or streamed.
import { Elysia } from 'elysia'
import { chatBodySchema } from '../../inference/chat-request.ts'
import { costHeaders } from '../../inference/relay-buffered.ts'
import { relayChatStream } from '../../inference/relay-stream.ts'
import { buyerKeyAuth } from '../auth.ts'
import { ownResponse } from '../own-response.ts'
import {
  beginInference,
  type InferenceDeps,
  inferencePipeline,
  SUPPORT_REFERENCE_HEADER,
  settleBuffered,
  streamContext,
} from './pipeline.ts'

export function chatRoutes(deps: InferenceDeps) {
  const pipeline = inferencePipeline(deps)
  return new Elysia({ name: 'svc/chat', seed: deps.keys.prefix }).use(buyerKeyAuth(deps)).post(
    '/v1/chat/completions',
    async ({ body, buyerKey, request, set }) => {
      const begun = await beginInference(pipeline, body, buyerKey, request)
      if (!begun.chat.stream) {
        const { body: answer, settlement } = await settleBuffered(pipeline, begun)
        return ownResponse(set, JSON.stringify(answer), {
          'content-type': 'application/json',
          [SUPPORT_REFERENCE_HEADER]: begun.supportReference,
          ...costHeaders(settlement),
        })
      }
      // Cost and balance headers are not sent: the head goes out before the relay.
      return ownResponse(set, relayChatStream(streamContext(pipeline, begun)), {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        [SUPPORT_REFERENCE_HEADER]: begun.supportReference,
      })
    },
    { buyerKey: true, body: chatBodySchema },
  )
}
