// Streamed Responses: only OpenAI's own `response.*` events, in OpenAI's order, each with its
// sequence_number and an `event:` line equal to its JSON type. The supplier's chat chunks become
// output items: reasoning, the message, each function call, each opened with output_item.added,
// filled by its deltas and closed with its .done events before the next opens. An item that begins
// while another is open waits its turn, its pieces gathered. A function call streams its arguments
// as they come and stays open while they may grow: a supplier may send more of them after the next
// call has begun. Its arguments end where their JSON object closes: no valid JSON goes on after
// one, and what does is not sent (nor kept by the buffered answer). It closes once something after
// it has begun and its object has closed, else at the stream's end.
// Cost rides flat on response.completed / response.incomplete; a clearing that does not commit
// is response.failed. One whose outcome could not be learnt (the store stayed away) is OpenAI's
// `error` event, code store_unavailable, naming the request's record: not response.failed, which
// says nothing was charged. No [DONE], no svc.cost frame.
import { formatMicros } from '../money/units.ts'
import type { ClearedUsage } from './clear-usage.ts'
import { contentPieces } from './content-parts.ts'
import { isRecord } from './json-object.ts'
import { JsonPrefix } from './json-prefix.ts'
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
import { type StreamCall, StreamToolCalls, type ToolCallDelta } from './stream-tool-calls.ts'
import { firstChoice } from './upstream-events.ts'

/** One output item of the stream. Items go on the wire in the order they began, one at a time. */
interface StreamItem {
  kind: 'reasoning' | 'message' | 'refusal' | 'function_call'
  outputIndex: number
  id: string
  text: string
  /** A function call's pieces so far, and the call_id it went on the wire with. */
  call?: StreamCall
  callId?: string
  /** A function call's arguments as JSON so far: once a whole object, the call is. */
  json?: JsonPrefix
  /** output_item.added has been sent. */
  sent: boolean
  /** How it ends once its turn comes: no more of it will come; null while it may still grow. */
  ending: ItemStatus | null
  /** The item as it was closed; null while open. */
  done: OutputItem | null
}

/** The Responses wire shape of one stream: its items, its sequence numbers. */
class ResponsesShape implements StreamShape {
  private sequence = 0
  private readonly items: StreamItem[] = []
  /** The first item not closed yet: the one open on the wire once sent; those after it wait. */
  private front = 0
  /** The reasoning or message item that text goes to now, if any. */
  private current: StreamItem | null = null
  private readonly calls = new StreamToolCalls()
  private readonly callItems = new Map<StreamCall, StreamItem>()
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

  /** An item id of its own: a second message or reasoning item (text after a call) gets a suffix. */
  private uniqueId(id: string): string {
    return this.items.some((item) => item.id === id) ? `${id}_${this.items.length}` : id
  }

  private where(item: StreamItem) {
    return { item_id: item.id, output_index: item.outputIndex }
  }

  /** Its text so far; a call's arguments end with their object once it closed (argumentsText). */
  private text(item: StreamItem): string {
    if (!item.call) return item.text
    return item.json!.whole ? item.call.args.slice(0, item.json!.end) : item.call.args
  }

  /** The item as a response object gives it: `text` its text so far, or none (as it opens). */
  private item(item: StreamItem, status: ItemStatus, text = this.text(item)): OutputItem {
    if (item.kind === 'reasoning') return { ...reasoningItem(this.shape, text, status), id: item.id }
    if (item.kind === 'message') return { ...messageItem(this.shape, text, status), id: item.id }
    if (item.kind === 'refusal') return refusalItem(this.shape, text, status, item.id)
    const call = item.call!
    const callId = item.callId ?? call.id ?? `call_${this.shape.id.slice(5)}_${call.ordinal}`
    const fields = { callId, name: call.name ?? '', arguments: text }
    return { ...functionCallItem(this.shape, call.ordinal, fields, status), id: item.id }
  }

  /** A new item, after all the others: the text item before it is complete. */
  private begin(kind: StreamItem['kind'], call?: StreamCall): StreamItem {
    if (this.current) this.current.ending = 'completed'
    const id =
      kind === 'function_call'
        ? itemIds.functionCall(this.shape, call!.ordinal)
        : this.uniqueId(kind === 'reasoning' ? itemIds.reasoning(this.shape) : itemIds.message(this.shape))
    const item: StreamItem = {
      kind,
      outputIndex: this.items.length,
      id,
      text: '',
      call,
      json: call ? new JsonPrefix() : undefined,
      sent: false,
      ending: null,
      done: null,
    }
    this.items.push(item)
    this.current = kind === 'function_call' ? null : item
    return item
  }

  /** Puts the items whose turn has come on the wire: the front one opened, closed once it ends. */
  private advance(): string {
    let out = ''
    while (this.front < this.items.length) {
      const item = this.items[this.front]!
      if (!item.sent) {
        // A call goes out with its name (it may come after the first arguments).
        if (item.kind === 'function_call' && item.call!.name === null && item.ending === null) break
        out += this.open(item)
      }
      // A whole call that something has come after is done: the next item's turn.
      const after = this.front < this.items.length - 1
      if (item.ending === null && after && item.json?.whole) item.ending = 'completed'
      if (item.ending === null) break
      out += this.close(item, item.ending)
      this.front++
    }
    return out
  }

  private open(item: StreamItem): string {
    item.sent = true
    // The call_id it opens with is its own to the end (a client matches the two).
    if (item.call) item.callId = item.call.id ?? `call_${this.shape.id.slice(5)}_${item.call.ordinal}`
    let out = this.event('response.output_item.added', {
      output_index: item.outputIndex,
      item: this.item(item, 'in_progress', ''),
    })
    const { kind } = item
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
    // What came while it waited its turn goes as one delta.
    const waited = this.text(item)
    return waited ? out + this.delta(item, waited) : out
  }

  private close(item: StreamItem, status: ItemStatus): string {
    const text = this.text(item)
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
        name: item.call!.name ?? '',
        arguments: text,
      })
    }
    item.done = this.item(item, status)
    out += this.event('response.output_item.done', { output_index: item.outputIndex, item: item.done })
    return out
  }

  /** One piece of an item's text, on the wire if the item is open there (else it waits). */
  private delta(item: StreamItem, delta: string): string {
    if (!item.sent || item.done || delta === '') return ''
    const where = this.where(item)
    if (item.kind === 'function_call')
      return this.event('response.function_call_arguments.delta', { ...where, delta })
    if (item.kind === 'message') {
      return this.event('response.output_text.delta', { ...where, content_index: 0, delta, logprobs: [] })
    }
    if (item.kind === 'refusal')
      return this.event('response.refusal.delta', { ...where, content_index: 0, delta })
    if (this.summary) {
      return this.event('response.reasoning_summary_text.delta', { ...where, summary_index: 0, delta })
    }
    return this.event('response.reasoning_text.delta', { ...where, content_index: 0, delta })
  }

  private textDelta(kind: 'reasoning' | 'message' | 'refusal', delta: string): string {
    const item = this.current?.kind === kind ? this.current : this.begin(kind)
    item.text += delta
    return this.piece(item, delta)
  }

  /**
   * A piece just added to an item: streamed if the item is open on the wire (before the piece may
   * close it), else it waits its turn.
   */
  private piece(item: StreamItem, piece: string): string {
    const out = item.sent ? this.delta(item, piece) : ''
    return out + this.advance()
  }

  private callDelta(delta: ToolCallDelta): string {
    const taken = this.calls.take(delta)
    if (!taken) return ''
    const { call, piece, opened } = taken
    if (opened) this.callItems.set(call, this.begin('function_call', call))
    const item = this.callItems.get(call)!
    // The call's arguments have the piece already: what was its text before it.
    const before = item.json!.whole ? item.json!.end : call.args.length - piece.length
    item.json!.feed(piece)
    // Only what is part of its arguments: nothing after their object once it closed.
    return this.piece(item, this.text(item).slice(before))
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
      // Only what the events announced, as they left it: an item still open is in progress.
      const announced = this.items.filter((item) => item.sent)
      const output = announced.map((item) => item.done ?? this.item(item, 'in_progress'))
      const failed = responseObject(shape, 'failed', output, null)
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
    if (this.items.length === 0) this.begin('message')
    // Each item that may still have grown ends now, and all go out in turn.
    for (const item of this.items) item.ending ??= status
    frames.push(this.advance())
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
