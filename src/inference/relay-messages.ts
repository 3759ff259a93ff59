// Streamed Messages: Anthropic's events in Anthropic's order, each with an `event:` line equal to
// its JSON type. message_start and a ping open the stream; the supplier's thinking, text and tool
// calls become content blocks as they come, each opened by content_block_start, filled by its
// deltas and closed by content_block_stop before the next opens. A block that begins while another
// is open waits its turn, its pieces gathered. A tool call streams its arguments as input_json_delta
// up to their safe beginning (json-prefix.ts: a client parses them as partial JSON at every read),
// and stays open while they may grow: parallel calls may come interleaved. It closes once something
// after it has begun and its arguments are a whole object, else at the end, with the closers of
// what was sent: the pieces put together are the input a buffered answer gives; arguments with no
// safe beginning go whole at its close ({arguments}). message_delta (stop
// reason, billed usage, and the cost as extra fields an Anthropic client ignores) and
// message_stop wait for the clear, as chat's [DONE] does. A stream that ended short, a clear that
// did not commit, or one whose outcome is not known ends with Anthropic's `error` event instead.
// Silence is filled with `ping` events.
import { formatMicros } from '../money/units.ts'
import type { ClearedUsage } from './clear-usage.ts'
import { contentPieces } from './content-parts.ts'
import { isRecord } from './json-object.ts'
import { JsonPrefix } from './json-prefix.ts'
import {
  type MessageShape,
  messageObject,
  messagesUsage,
  stopReason,
  textBlock,
  thinkingBlock,
  toolInput,
  toolUseBlock,
  toolUseId,
} from './messages-object.ts'
import { NOTHING_USABLE } from './relay-chat-stream.ts'
import {
  relayStream,
  type StreamClearing,
  type StreamContext,
  type StreamShape,
  unknownOutcomeMessage,
} from './relay-stream.ts'
import { reasoningText } from './responses-object.ts'
import { type StreamCall, StreamToolCalls, type ToolCallDelta } from './stream-tool-calls.ts'
import { firstChoice } from './upstream-events.ts'

const event = (type: string, payload: Record<string, unknown> = {}) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`

/** Anthropic's error event, with the contract's code and support reference beside its message. */
export function messagesErrorEvent(
  type: string,
  code: string,
  message: string,
  extra: Record<string, unknown> = {},
): string {
  return event('error', { error: { type, message, code, ...extra } })
}

/** One content block of the stream, at its index in the message's content. */
interface Block {
  kind: 'thinking' | 'text' | 'tool_use'
  index: number
  /** Its thinking or text not sent yet; a tool_use's call, and its arguments read as JSON. */
  text: string
  call?: StreamCall
  json?: JsonPrefix
  /** content_block_start has been sent; how much of a call's arguments has. */
  started: boolean
  sent: number
  /** No more of it will come: closed once its turn comes. */
  ending: boolean
}

class MessagesShape implements StreamShape {
  readonly keepAlive = event('ping')
  private readonly blocks: Block[] = []
  /** The first block not closed yet: the one open on the wire once started; those after it wait. */
  private front = 0
  /** The thinking or text block that text goes to now, if any. */
  private current: Block | null = null
  private readonly calls = new StreamToolCalls()
  private readonly callBlocks = new Map<StreamCall, Block>()
  /** Text and refusal relayed: a refusal with no text stops as `refusal`, as a buffered one does. */
  private sawText = false
  private sawRefusal = false
  private finish: { finish_reason?: unknown; stop_reason?: unknown; matched_stop?: unknown } = {}

  constructor(
    private readonly shape: MessageShape,
    private readonly supportReference: string,
    private readonly inputTokens: Promise<number>,
  ) {}

  async start(): Promise<string[]> {
    // Anthropic's message_start gives the prompt's tokens, and some clients (LangChain) read them
    // only there: the gateway's count, as count_tokens gives it; message_delta has the billed one.
    const usage = {
      input_tokens: await this.inputTokens,
      output_tokens: 0,
      cache_creation_input_tokens: null,
      cache_read_input_tokens: null,
    }
    const message = messageObject(this.shape, [], { stop_reason: null, stop_sequence: null }, usage)
    return [event('message_start', { message }), this.keepAlive]
  }

  /** A new block, after all the others: the text block before it is complete. */
  private begin(kind: Block['kind'], call?: StreamCall): Block {
    if (this.current) this.current.ending = true
    const block: Block = {
      kind,
      index: this.blocks.length,
      text: '',
      call,
      json: call ? new JsonPrefix() : undefined,
      started: false,
      sent: 0,
      ending: false,
    }
    this.blocks.push(block)
    this.current = kind === 'tool_use' ? null : block
    return block
  }

  /** Puts the blocks whose turn has come on the wire: the front one started, filled, stopped once it ends. */
  private advance(): string {
    let out = ''
    while (this.front < this.blocks.length) {
      const block = this.blocks[this.front]!
      if (!block.started) {
        // A call goes out with its name (it may come after the first arguments).
        if (block.call && block.call.name === null && !block.ending) break
        out += this.open(block)
      }
      out += this.fill(block)
      // A whole call that something has come after is done: the next block's turn.
      if (!block.ending && this.front < this.blocks.length - 1 && block.json?.whole) block.ending = true
      if (!block.ending) break
      out += this.close(block)
      this.front++
    }
    return out
  }

  private open(block: Block): string {
    block.started = true
    const { kind, call } = block
    const content =
      kind === 'thinking'
        ? thinkingBlock('')
        : kind === 'text'
          ? textBlock('')
          : toolUseBlock(call!.id ?? toolUseId(this.shape, call!.ordinal), call!.name ?? '', {})
    return event('content_block_start', { index: block.index, content_block: content })
  }

  /** What the block has that is not on the wire yet: a tool_use's up to its safe beginning. */
  private fill(block: Block): string {
    const text = block.call ? block.call.args : block.text
    const upTo = block.json ? block.json.safe : text.length
    if (block.sent >= upTo) return ''
    const piece = text.slice(block.sent, upTo)
    // Text sent is not kept (a long answer would hold it all); a call's arguments are, by its call.
    if (block.call) block.sent = upTo
    else block.text = ''
    const delta =
      block.kind === 'thinking'
        ? { type: 'thinking_delta', thinking: piece }
        : block.kind === 'text'
          ? { type: 'text_delta', text: piece }
          : { type: 'input_json_delta', partial_json: piece }
    return event('content_block_delta', { index: block.index, delta })
  }

  private close(block: Block): string {
    const args = block.call?.args ?? ''
    // Arguments cut short or turned invalid end as their safe beginning closed; ones that never
    // began a JSON object (a bare string, a model's single quotes) would break the client's parse:
    // they go whole as the buffered answer's input does ({arguments}).
    let partial_json = ''
    if (block.json && block.json.safe > 0) partial_json = block.json.closing
    else if (args.trim() !== '') partial_json = JSON.stringify(toolInput(args))
    const out = partial_json
      ? event('content_block_delta', {
          index: block.index,
          delta: { type: 'input_json_delta', partial_json },
        })
      : ''
    return `${out}${event('content_block_stop', { index: block.index })}`
  }

  private textDelta(kind: 'thinking' | 'text', text: string): string {
    const block = this.current?.kind === kind ? this.current : this.begin(kind)
    block.text += text
    return this.advance()
  }

  private thinking(text: string): string {
    return this.textDelta('thinking', text)
  }

  private text(text: string): string {
    return this.textDelta('text', text)
  }

  private callDelta(delta: ToolCallDelta): string {
    const taken = this.calls.take(delta)
    if (!taken) return ''
    const { call, piece, opened } = taken
    if (opened) this.callBlocks.set(call, this.begin('tool_use', call))
    this.callBlocks.get(call)!.json!.feed(piece)
    return this.advance()
  }

  content(frame: string): string | null {
    const choice = firstChoice(frame)
    if (!choice) return null
    if (choice.finish_reason != null) this.finish = choice as typeof this.finish
    const delta = choice.delta ?? {}
    let out = ''
    const reasoning = reasoningText(delta)
    if (reasoning) out += this.thinking(reasoning)
    if (typeof delta.content === 'string') {
      if (delta.content) {
        this.sawText = true
        out += this.text(delta.content)
      }
    } else if (Array.isArray(delta.content)) {
      // Content as parts (Mistral's): its thinking is thinking, its text text.
      for (const piece of contentPieces(delta.content)) {
        if (piece.thinking) out += this.thinking(piece.text)
        else {
          this.sawText = true
          out += this.text(piece.text)
        }
      }
    }
    // A refusal is generated text, billed as such: shown as text, as the buffered message shows it.
    if (typeof delta.refusal === 'string' && delta.refusal) {
      this.sawRefusal = true
      out += this.text(delta.refusal)
    }
    if (Array.isArray(delta.tool_calls)) {
      // A call that is not an object is no call (a supplier's null): skipped, as chat relays it.
      for (const call of delta.tool_calls as ToolCallDelta[]) if (isRecord(call)) out += this.callDelta(call)
    }
    return out || null
  }

  private cost(clearing: ClearedUsage) {
    return {
      costUsdc: formatMicros(clearing.charged),
      clearingPriceCents: clearing.askCents,
      supportReference: this.supportReference,
    }
  }

  end(clearing: StreamClearing, complete: boolean) {
    const ref = { supportReference: this.supportReference }
    if (clearing === 'released') {
      return {
        frames: [messagesErrorEvent('api_error', 'provider_error', NOTHING_USABLE, ref)],
        error: 'provider_error',
      }
    }
    if (clearing === 'not_committed') {
      const message = 'settlement did not commit; nothing was charged'
      return {
        frames: [messagesErrorEvent('api_error', 'settle_failed', message, ref)],
        error: 'settle_failed',
      }
    }
    if (clearing === 'unknown') {
      const message = unknownOutcomeMessage(this.supportReference)
      return {
        frames: [messagesErrorEvent('api_error', 'store_unavailable', message, ref)],
        error: 'store_unavailable',
      }
    }
    // Each block that may still have grown ends now, and all go out in turn.
    for (const block of this.blocks) block.ending = true
    const frames = [this.advance()]
    if (!complete) {
      // Billed on estimate: the cost is final, but the answer is not whole.
      const message = 'the stream ended before the provider reported usage; estimated usage was billed'
      frames.push(messagesErrorEvent('api_error', 'stream_incomplete', message, this.cost(clearing)))
      return { frames, error: 'stream_incomplete' }
    }
    frames.push(
      event('message_delta', {
        delta: stopReason(
          this.sawRefusal && !this.sawText ? { finish_reason: 'content_filter' } : this.finish,
          this.shape.stopSequences,
          this.calls.list.length > 0,
        ),
        usage: messagesUsage(clearing.usage),
        ...this.cost(clearing),
      }),
      event('message_stop'),
    )
    return { frames, error: null }
  }
}

/** `inputTokens`: the prompt's count for message_start (0 when it could not be made). */
export function relayMessagesStream(
  ctx: StreamContext,
  shape: MessageShape,
  inputTokens: Promise<number>,
): ReadableStream<Uint8Array> {
  return relayStream(ctx, new MessagesShape(shape, ctx.supportReference, inputTokens))
}
