// Streamed Messages: Anthropic's events in Anthropic's order, each with an `event:` line equal to
// its JSON type. message_start and a ping open the stream; the supplier's thinking and text become
// content blocks as they come, each opened by content_block_start, filled by its deltas and closed
// by content_block_stop before the next opens. Tool calls are sent once the supplier's stream has
// ended, one whole tool_use block each: parallel calls may come interleaved, and a call's arguments
// can grow until the end, while Anthropic's stream has one block open at a time. message_delta (stop
// reason, billed usage, and the cost as extra fields an Anthropic client ignores) and
// message_stop wait for the clear, as chat's [DONE] does. A stream that ended short, a clear that
// did not commit, or one whose outcome is not known ends with Anthropic's `error` event instead.
// Silence is filled with `ping` events.
import { formatMicros } from '../money/units.ts'
import type { ClearedUsage } from './clear-usage.ts'
import { contentPieces } from './content-parts.ts'
import { isRecord } from './json-object.ts'
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
import { StreamToolCalls, type ToolCallDelta } from './stream-tool-calls.ts'
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

/** The block open now: its index on the wire. */
interface OpenBlock {
  kind: 'thinking' | 'text' | 'tool_use'
  index: number
  /** A tool_use's arguments: sent whole at its close, as the input a buffered answer gives. */
  args?: string
}

class MessagesShape implements StreamShape {
  readonly keepAlive = event('ping')
  private blocks = 0
  private current: OpenBlock | null = null
  private readonly calls = new StreamToolCalls()
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

  private close(): string {
    if (!this.current) return ''
    let out = ''
    // Arguments that are no JSON object (a model's single quotes, a bare string) would break the
    // client's parse of the input: they go as the buffered answer's input does ({arguments}).
    if (this.current.args) {
      out = this.delta({
        type: 'input_json_delta',
        partial_json: JSON.stringify(toolInput(this.current.args)),
      })
    }
    out += event('content_block_stop', { index: this.current.index })
    this.current = null
    return out
  }

  private open(kind: OpenBlock['kind'], block: Record<string, unknown>): string {
    const out = this.close()
    this.current = { kind, index: this.blocks++ }
    return out + event('content_block_start', { index: this.current.index, content_block: block })
  }

  private delta(delta: Record<string, unknown>): string {
    return event('content_block_delta', { index: this.current!.index, delta })
  }

  private thinking(text: string): string {
    const out = this.current?.kind === 'thinking' ? '' : this.open('thinking', thinkingBlock(''))
    return out + this.delta({ type: 'thinking_delta', thinking: text })
  }

  private text(text: string): string {
    const out = this.current?.kind === 'text' ? '' : this.open('text', textBlock(''))
    return out + this.delta({ type: 'text_delta', text })
  }

  /** Every call the supplier sent, each whole in its block, in the order they came. */
  private toolBlocks(): string {
    let out = ''
    for (const call of this.calls.list) {
      const id = call.id ?? toolUseId(this.shape, call.ordinal)
      out += this.open('tool_use', toolUseBlock(id, call.name ?? '', {}))
      this.current!.args = call.args
    }
    return out + this.close()
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
      for (const call of delta.tool_calls as ToolCallDelta[]) if (isRecord(call)) this.calls.take(call)
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
    const frames = [this.close(), this.toolBlocks()]
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
