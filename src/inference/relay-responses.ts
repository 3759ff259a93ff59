// Streamed Responses: only OpenAI's own `response.*` events, in OpenAI's order, each with its
// sequence_number and an `event:` line equal to its JSON type. The supplier's chat chunks become
// output items as they come: reasoning, the message, each function call, each opened with
// output_item.added, filled by its deltas and closed with its .done events before the next opens.
// Cost rides flat on response.completed / response.incomplete; a clearing that does not commit
// is response.failed. One whose outcome could not be learnt (the store stayed away) is OpenAI's
// `error` event, code store_unavailable, naming the request's record: not response.failed, which
// says nothing was charged. No [DONE], no svc.cost frame.
import { formatMicros } from '../money/units.ts'
import type { ClearedUsage } from './clear-usage.ts'
import { contentPieces } from './content-parts.ts'
import { isRecord } from './json-object.ts'
import {
  relayStream,
  type StreamClearing,
  type StreamContext,
  type StreamShape,
  unknownOutcomeMessage,
} from './relay-stream.ts'
import {
  functionCallItem,
  type ItemStatus,
  incompleteReason,
  itemIds,
  messageItem,
  type OutputItem,
  reasoningItem,
  reasoningText,
  refusalItem,
  responseObject,
  responsesUsage,
} from './responses-object.ts'
import type { ResponseShape } from './responses-request.ts'
import { firstChoice } from './upstream-events.ts'

/** One output item of the stream, open until its .done events are sent. */
interface StreamItem {
  kind: 'reasoning' | 'message' | 'refusal' | 'function_call'
  outputIndex: number
  id: string
  text: string
  /** For a function call: its index among the supplier's tool calls, id and name. */
  call?: { index: number; callId: string; name: string }
  /** The item as it was closed; null while open. */
  done: OutputItem | null
}

interface ToolCallDelta {
  index?: unknown
  id?: unknown
  function?: { name?: unknown; arguments?: unknown }
}

/** The Responses wire shape of one stream: its items, its sequence numbers. */
class ResponsesShape implements StreamShape {
  private sequence = 0
  private readonly items: StreamItem[] = []
  /** The reasoning or message item open now, if any. */
  private current: StreamItem | null = null
  private readonly calls = new Map<number, StreamItem>()
  private finishReason: unknown = null
  private supplierUsage: unknown = null

  constructor(
    private readonly shape: ResponseShape,
    private readonly supportReference: string,
  ) {}

  private event(type: string, payload: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.sequence++, ...payload })}\n\n`
  }

  private get summary() {
    return this.shape.reasoning.summary !== null
  }

  /** The message's id; a second message item (a refusal beside text) gets one of its own. */
  private messageId(): string {
    const id = itemIds.message(this.shape)
    return this.items.some((item) => item.id === id) ? `${id}_${this.items.length}` : id
  }

  private where(item: StreamItem) {
    return { item_id: item.id, output_index: item.outputIndex }
  }

  private item(item: StreamItem, status: ItemStatus): OutputItem {
    if (item.kind === 'reasoning') return reasoningItem(this.shape, item.text, status)
    if (item.kind === 'message') return messageItem(this.shape, item.text, status)
    if (item.kind === 'refusal') return refusalItem(this.shape, item.text, status, item.id)
    const { callId, name, index } = item.call!
    return functionCallItem(this.shape, index, { callId, name, arguments: item.text }, status)
  }

  private open(kind: StreamItem['kind'], call?: StreamItem['call']): [StreamItem, string] {
    let out = this.current ? this.close(this.current, 'completed') : ''
    const id =
      kind === 'function_call'
        ? itemIds.functionCall(this.shape, call!.index)
        : kind === 'reasoning'
          ? itemIds.reasoning(this.shape)
          : this.messageId()
    const item: StreamItem = { kind, outputIndex: this.items.length, id, text: '', call, done: null }
    this.items.push(item)
    out += this.event('response.output_item.added', {
      output_index: item.outputIndex,
      item: this.item(item, 'in_progress'),
    })
    if (kind === 'reasoning' && this.summary) {
      out += this.event('response.reasoning_summary_part.added', {
        ...this.where(item),
        summary_index: 0,
        part: { type: 'summary_text', text: '' },
      })
    } else if (kind === 'reasoning') {
      out += this.event('response.content_part.added', {
        ...this.where(item),
        content_index: 0,
        part: { type: 'reasoning_text', text: '' },
      })
    } else if (kind === 'message') {
      out += this.event('response.content_part.added', {
        ...this.where(item),
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      })
    } else if (kind === 'refusal') {
      out += this.event('response.content_part.added', {
        ...this.where(item),
        content_index: 0,
        part: { type: 'refusal', refusal: '' },
      })
    }
    if (kind !== 'function_call') this.current = item
    return [item, out]
  }

  private close(item: StreamItem, status: ItemStatus): string {
    if (item.done) return ''
    if (this.current === item) this.current = null
    const { text } = item
    let out = ''
    if (item.kind === 'reasoning' && this.summary) {
      const where = { ...this.where(item), summary_index: 0 }
      out += this.event('response.reasoning_summary_text.done', { ...where, text })
      out += this.event('response.reasoning_summary_part.done', {
        ...where,
        part: { type: 'summary_text', text },
      })
    } else if (item.kind === 'reasoning') {
      const where = { ...this.where(item), content_index: 0 }
      out += this.event('response.reasoning_text.done', { ...where, text })
      out += this.event('response.content_part.done', { ...where, part: { type: 'reasoning_text', text } })
    } else if (item.kind === 'message') {
      const where = { ...this.where(item), content_index: 0 }
      out += this.event('response.output_text.done', { ...where, text, logprobs: [] })
      out += this.event('response.content_part.done', {
        ...where,
        part: { type: 'output_text', text, annotations: [] },
      })
    } else if (item.kind === 'refusal') {
      const where = { ...this.where(item), content_index: 0 }
      out += this.event('response.refusal.done', { ...where, refusal: text })
      out += this.event('response.content_part.done', { ...where, part: { type: 'refusal', refusal: text } })
    } else {
      out += this.event('response.function_call_arguments.done', {
        ...this.where(item),
        name: item.call!.name,
        arguments: text,
      })
    }
    item.done = this.item(item, status)
    out += this.event('response.output_item.done', { output_index: item.outputIndex, item: item.done })
    return out
  }

  private textDelta(kind: 'reasoning' | 'message' | 'refusal', delta: string): string {
    let out = ''
    let item = this.current
    if (item?.kind !== kind) [item, out] = this.open(kind)
    item!.text += delta
    const where = this.where(item!)
    if (kind === 'message') {
      return (
        out + this.event('response.output_text.delta', { ...where, content_index: 0, delta, logprobs: [] })
      )
    }
    if (kind === 'refusal')
      return out + this.event('response.refusal.delta', { ...where, content_index: 0, delta })
    if (this.summary) {
      return out + this.event('response.reasoning_summary_text.delta', { ...where, summary_index: 0, delta })
    }
    return out + this.event('response.reasoning_text.delta', { ...where, content_index: 0, delta })
  }

  private callDelta(delta: ToolCallDelta): string {
    const index = typeof delta.index === 'number' ? delta.index : 0
    let out = ''
    let item = this.calls.get(index)
    if (!item) {
      // A call opens with its id and name; the calls before it are complete by then.
      for (const open of this.calls.values()) out += this.close(open, 'completed')
      const callId = typeof delta.id === 'string' ? delta.id : `call_${this.shape.id.slice(5)}_${index}`
      const name = typeof delta.function?.name === 'string' ? delta.function.name : ''
      const [opened, events] = this.open('function_call', { index, callId, name })
      out += events
      item = opened
      this.calls.set(index, item)
    }
    const piece = delta.function?.arguments
    if (typeof piece !== 'string' || piece === '') return out
    item.text += piece
    // Arguments for a call already closed still count in its item, but its events are over.
    if (item.done) return out
    return out + this.event('response.function_call_arguments.delta', { ...this.where(item), delta: piece })
  }

  private cost(clearing: ClearedUsage) {
    return {
      costUsdc: formatMicros(clearing.charged),
      clearingPriceCents: clearing.askCents,
      supportReference: this.supportReference,
    }
  }

  start(): string[] {
    const inProgress = responseObject(this.shape, 'in_progress', [], null)
    return [
      this.event('response.created', { response: inProgress }),
      this.event('response.in_progress', { response: inProgress }),
    ]
  }

  content(frame: string): string | null {
    const choice = firstChoice(frame)
    if (!choice) return null
    if (choice.finish_reason != null) this.finishReason = choice.finish_reason
    const delta = choice.delta ?? {}
    let out = ''
    const reasoning = reasoningText(delta)
    if (reasoning) out += this.textDelta('reasoning', reasoning)
    if (typeof delta.content === 'string') {
      if (delta.content) out += this.textDelta('message', delta.content)
    } else if (Array.isArray(delta.content)) {
      // Content as parts (Mistral's): its thinking is reasoning, its text the message.
      for (const piece of contentPieces(delta.content))
        out += this.textDelta(piece.thinking ? 'reasoning' : 'message', piece.text)
    }
    // A refusal is generated text, billed as such: its own message, as the buffered answer gives it.
    if (typeof delta.refusal === 'string' && delta.refusal) out += this.textDelta('refusal', delta.refusal)
    if (Array.isArray(delta.tool_calls)) {
      // A call that is not an object is no call (a supplier's null): skipped, as chat relays it.
      for (const call of delta.tool_calls as ToolCallDelta[]) if (isRecord(call)) out += this.callDelta(call)
    }
    return out || null
  }

  usage(chunk: Record<string, unknown> | null): void {
    this.supplierUsage = chunk?.usage
  }

  /** Every item at its end state, for a response object. */
  private output(status: ItemStatus): OutputItem[] {
    return this.items.map((item) => item.done ?? this.item(item, status))
  }

  end(clearing: StreamClearing, complete: boolean) {
    const { shape } = this
    if (clearing === 'not_committed' || clearing === 'released') {
      const failed = responseObject(shape, 'failed', this.output(complete ? 'completed' : 'incomplete'), null)
      const error = clearing === 'released' ? 'provider_error' : 'settle_failed'
      return { frames: [this.event('response.failed', { response: failed })], error }
    }
    if (clearing === 'unknown') {
      const event = this.event('error', {
        code: 'store_unavailable',
        message: unknownOutcomeMessage(this.supportReference),
        param: null,
        supportReference: this.supportReference,
      })
      return { frames: [event], error: 'store_unavailable' }
    }
    const reason = complete ? incompleteReason(this.finishReason) : 'stream_incomplete'
    const status: ItemStatus = reason ? 'incomplete' : 'completed'
    const frames: string[] = []
    // An answer with nothing in it is still one (empty) message, as OpenAI sends it.
    if (this.items.length === 0) frames.push(this.open('message')[1])
    for (const item of this.items) frames.push(this.close(item, status))
    if (!reason) {
      const usage = responsesUsage(clearing.usage, this.supplierUsage)
      frames.push(
        this.event('response.completed', {
          response: responseObject(shape, 'completed', this.output(status), usage),
          ...this.cost(clearing),
        }),
      )
      return { frames, error: null }
    }
    // Billed but incomplete (cut at the limit, or ended without usage): the usage key stays
    // absent, as the contract says; the cost is final.
    frames.push(
      this.event('response.incomplete', {
        response: responseObject(shape, 'incomplete', this.output(status), null, reason),
        ...this.cost(clearing),
      }),
    )
    return { frames, error: complete ? null : 'stream_incomplete' }
  }
}

export function relayResponsesStream(ctx: StreamContext, shape: ResponseShape): ReadableStream<Uint8Array> {
  return relayStream(ctx, new ResponsesShape(shape, ctx.supportReference))
}
