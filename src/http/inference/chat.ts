// POST /v1/chat/completions: thin. The inference service admits, dispatches and clears; this route
// only shapes the chat answer, buffered or streamed.
import { Elysia } from 'elysia'
import { chatBodySchema } from '../../inference/chat-request.ts'
import { costHeaders } from '../../inference/relay-buffered.ts'
import { relayChatStream } from '../../inference/relay-chat-stream.ts'
import type { InferenceService } from '../../inference/service.ts'
import { formatMicros } from '../../money/units.ts'
import { SUPPORT_REFERENCE_HEADER } from '../../records/support-reference.ts'
import { buyerKeyAuth } from '../auth.ts'
import { ownResponse } from '../own-response.ts'
import { callOf, noteCost } from './call.ts'

export function chatRoutes(service: InferenceService) {
  const { deps } = service
  return new Elysia({ name: 'svc/chat', seed: deps.keys.prefix }).use(buyerKeyAuth(deps)).post(
    '/v1/chat/completions',
    async ({ body, buyerKey, request, set }) => {
      const begun = await service.beginChat(body, buyerKey, callOf(request))
      const reference = { [SUPPORT_REFERENCE_HEADER]: begun.call.supportReference }
      if (!begun.chat.stream) {
        const { body: answer, clearing } = await service.clearBuffered(begun)
        noteCost(request, formatMicros(clearing.charged))
        return ownResponse(set, JSON.stringify(answer), {
          'content-type': 'application/json',
          ...reference,
          ...costHeaders(clearing),
        })
      }
      // Cost and balance headers are not sent: the head goes out before the relay.
      return ownResponse(set, relayChatStream(service.streamContext(begun)), {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        ...reference,
      })
    },
    { buyerKey: true, body: chatBodySchema },
  )
}
