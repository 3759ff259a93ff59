// Streamed Responses: only OpenAI's own `response.*` events, in OpenAI's order, each with its
// sequence_number and an `event:` line equal to its JSON type. Cost rides flat on
// response.completed / response.incomplete; a settlement that does not commit is response.failed.
// No [DONE], no svc.cost frame.
import { formatMicros } from '../money/units.ts'
import { type StreamContext, StreamSettler } from './relay-stream.ts'
import { messageItem, type ResponseShape, responseObject } from './responses-request.ts'
import type { Settlement } from './settle.ts'

const encoder = new TextEncoder()

export function relayResponsesStream(ctx: StreamContext, shape: ResponseShape): ReadableStream<Uint8Array> {
  const settler = new StreamSettler(ctx)
  const item = messageItem(shape, '', 'in_progress')
  const position = { item_id: item.id, output_index: 0, content_index: 0 }
  let sequence = 0
  let text = ''
  let started = false
  let silentMs = 0
  let closed = false
  let cancelled = false

  const event = (type: string, payload: Record<string, unknown>) =>
    encoder.encode(
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...payload })}\n\n`,
    )

  const cost = (settlement: Settlement) => ({
    costUsdc: formatMicros(settlement.charged),
    clearingPriceCents: settlement.askCents,
    supportReference: ctx.supportReference,
  })

  const finish = (settlement: Settlement | null, error: string | null) => {
    closed = true
    ctx.onFinish?.({ settlement, error })
  }

  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!started) {
        started = true
        const inProgress = responseObject(shape, 'in_progress', [], null)
        controller.enqueue(event('response.created', { response: inProgress }))
        controller.enqueue(event('response.in_progress', { response: inProgress }))
        controller.enqueue(event('response.output_item.added', { output_index: 0, item }))
        controller.enqueue(
          event('response.content_part.added', {
            ...position,
            part: { type: 'output_text', text: '', annotations: [] },
          }),
        )
        return
      }
      for (;;) {
        const next = await settler.events.next(ctx.timing.keepAliveMs)
        if (cancelled) return
        switch (next.kind) {
          case 'content':
            silentMs = 0
            if (!next.delta) continue
            text += next.delta
            settler.counter.add(next.delta)
            controller.enqueue(
              event('response.output_text.delta', { ...position, delta: next.delta, logprobs: [] }),
            )
            return
          case 'usage':
            settler.noteUsage(next.usage)
            continue
          case 'done':
            continue
          case 'silence':
            silentMs += ctx.timing.keepAliveMs
            if (silentMs < ctx.timing.idleMs) {
              controller.enqueue(encoder.encode(': keep-alive\n\n'))
              return
            }
            settler.stop()
            continue
          case 'end': {
            const complete = settler.hasUsage
            const settlement = await settler.settle(complete ? 'completed' : 'incomplete')
            if (cancelled) return
            const status = complete ? 'completed' : 'incomplete'
            const done = messageItem(shape, text, status)
            const part = done.content[0]!
            if (!settlement) {
              controller.enqueue(
                event('response.failed', { response: responseObject(shape, 'failed', [done], null) }),
              )
              finish(null, 'settle_failed')
              controller.close()
              return
            }
            controller.enqueue(event('response.output_text.done', { ...position, text, logprobs: [] }))
            controller.enqueue(event('response.content_part.done', { ...position, part }))
            controller.enqueue(event('response.output_item.done', { output_index: 0, item: done }))
            if (complete) {
              const usage = {
                input_tokens: settlement.usage.promptTokens,
                output_tokens: settlement.usage.completionTokens,
              }
              controller.enqueue(
                event('response.completed', {
                  response: responseObject(shape, 'completed', [done], usage),
                  ...cost(settlement),
                }),
              )
              finish(settlement, null)
            } else {
              // Billed on estimate; the usage key stays absent, as the contract says.
              controller.enqueue(
                event('response.incomplete', {
                  response: responseObject(shape, 'incomplete', [done], null, 'stream_incomplete'),
                  ...cost(settlement),
                }),
              )
              finish(settlement, 'stream_incomplete')
            }
            controller.close()
            return
          }
        }
      }
    },
    async cancel() {
      if (closed) return
      cancelled = true
      settler.stop()
      finish(await settler.settle(settler.hasUsage ? 'completed' : 'incomplete'), 'client_closed')
    },
  })
}
