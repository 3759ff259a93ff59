// Streamed Responses: only OpenAI's own `response.*` events, in OpenAI's order, each with its
// sequence_number and an `event:` line equal to its JSON type. Cost rides flat on
// response.completed / response.incomplete; a settlement that does not commit is response.failed.
// No [DONE], no svc.cost frame.
import { formatMicros } from '../money/units.ts'
import { relayStream, type StreamContext } from './relay-stream.ts'
import { messageItem, type ResponseShape, responseObject } from './responses-request.ts'
import type { Settlement } from './settle.ts'

const encoder = new TextEncoder()

export function relayResponsesStream(ctx: StreamContext, shape: ResponseShape): ReadableStream<Uint8Array> {
  const item = messageItem(shape, '', 'in_progress')
  const position = { item_id: item.id, output_index: 0, content_index: 0 }
  let sequence = 0
  let text = ''

  const event = (type: string, payload: Record<string, unknown>) =>
    encoder.encode(
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...payload })}\n\n`,
    )

  const cost = (settlement: Settlement) => ({
    costUsdc: formatMicros(settlement.charged),
    clearingPriceCents: settlement.askCents,
    supportReference: ctx.supportReference,
  })

  return relayStream(ctx, {
    start() {
      const inProgress = responseObject(shape, 'in_progress', [], null)
      return [
        event('response.created', { response: inProgress }),
        event('response.in_progress', { response: inProgress }),
        event('response.output_item.added', { output_index: 0, item }),
        event('response.content_part.added', {
          ...position,
          part: { type: 'output_text', text: '', annotations: [] },
        }),
      ]
    },
    content(_frame, delta) {
      if (!delta) return null
      text += delta
      return event('response.output_text.delta', { ...position, delta, logprobs: [] })
    },
    end(settlement, complete) {
      const done = messageItem(shape, text, complete ? 'completed' : 'incomplete')
      if (!settlement) {
        return {
          frames: [event('response.failed', { response: responseObject(shape, 'failed', [done], null) })],
          error: 'settle_failed',
        }
      }
      const frames = [
        event('response.output_text.done', { ...position, text, logprobs: [] }),
        event('response.content_part.done', { ...position, part: done.content[0]! }),
        event('response.output_item.done', { output_index: 0, item: done }),
      ]
      if (complete) {
        const usage = {
          input_tokens: settlement.usage.promptTokens,
          output_tokens: settlement.usage.completionTokens,
        }
        frames.push(
          event('response.completed', {
            response: responseObject(shape, 'completed', [done], usage),
            ...cost(settlement),
          }),
        )
        return { frames, error: null }
      }
      // Billed on estimate; the usage key stays absent, as the contract says.
      frames.push(
        event('response.incomplete', {
          response: responseObject(shape, 'incomplete', [done], null, 'stream_incomplete'),
          ...cost(settlement),
        }),
      )
      return { frames, error: 'stream_incomplete' }
    },
  })
}
