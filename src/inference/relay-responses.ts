// Streamed Responses: only OpenAI's own `response.*` events, in OpenAI's order, each with its
// sequence_number and an `event:` line equal to its JSON type. Cost rides flat on
// response.completed / response.incomplete; a settlement that does not commit is response.failed.
// No [DONE], no svc.cost frame.
import { formatMicros } from '../money/units.ts'
import { relayStream, type StreamContext, type StreamShape } from './relay-stream.ts'
import { messageItem, type ResponseShape, responseObject } from './responses-request.ts'
import type { Settlement } from './settle.ts'

/** The Responses wire shape of one stream: its item, its sequence numbers, the text so far. */
class ResponsesShape implements StreamShape {
  private readonly position: { item_id: string; output_index: number; content_index: number }
  private sequence = 0
  private text = ''

  constructor(
    private readonly shape: ResponseShape,
    private readonly supportReference: string,
  ) {
    this.position = { item_id: messageItem(shape, '', 'in_progress').id, output_index: 0, content_index: 0 }
  }

  private event(type: string, payload: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.sequence++, ...payload })}\n\n`
  }

  private cost(settlement: Settlement) {
    return {
      costUsdc: formatMicros(settlement.charged),
      clearingPriceCents: settlement.askCents,
      supportReference: this.supportReference,
    }
  }

  start(): string[] {
    const inProgress = responseObject(this.shape, 'in_progress', [], null)
    return [
      this.event('response.created', { response: inProgress }),
      this.event('response.in_progress', { response: inProgress }),
      this.event('response.output_item.added', {
        output_index: 0,
        item: messageItem(this.shape, '', 'in_progress'),
      }),
      this.event('response.content_part.added', {
        ...this.position,
        part: { type: 'output_text', text: '', annotations: [] },
      }),
    ]
  }

  content(_frame: string, delta: string): string | null {
    if (!delta) return null
    this.text += delta
    return this.event('response.output_text.delta', { ...this.position, delta, logprobs: [] })
  }

  end(settlement: Settlement | null, complete: boolean) {
    const { shape, text, position } = this
    const done = messageItem(shape, text, complete ? 'completed' : 'incomplete')
    if (!settlement) {
      return {
        frames: [this.event('response.failed', { response: responseObject(shape, 'failed', [done], null) })],
        error: 'settle_failed',
      }
    }
    const frames = [
      this.event('response.output_text.done', { ...position, text, logprobs: [] }),
      this.event('response.content_part.done', { ...position, part: done.content[0]! }),
      this.event('response.output_item.done', { output_index: 0, item: done }),
    ]
    if (complete) {
      const usage = {
        input_tokens: settlement.usage.promptTokens,
        output_tokens: settlement.usage.completionTokens,
      }
      frames.push(
        this.event('response.completed', {
          response: responseObject(shape, 'completed', [done], usage),
          ...this.cost(settlement),
        }),
      )
      return { frames, error: null }
    }
    // Billed on estimate; the usage key stays absent, as the contract says.
    frames.push(
      this.event('response.incomplete', {
        response: responseObject(shape, 'incomplete', [done], null, 'stream_incomplete'),
        ...this.cost(settlement),
      }),
    )
    return { frames, error: 'stream_incomplete' }
  }
}

export function relayResponsesStream(ctx: StreamContext, shape: ResponseShape): ReadableStream<Uint8Array> {
  return relayStream(ctx, new ResponsesShape(shape, ctx.supportReference))
}
