// Streamed chat: content chunks pass through as they come; the supplier's usage chunk and [DONE]
// wait for the clear; then the usage chunk, the svc.cost frame, [DONE]. A stream that ends
// without usage is billed on estimate, gets its cost frame, then the error `stream_incomplete`.
// The client stream is Bun's direct stream: frames are written straight to the response, no
// queue; a write the client is not taking is awaited before the supplier is read again
// (backpressure). One object per stream holds the state: per open stream, memory is what counts.
import type { Logger } from 'pino'
import type { LeaseRenewer } from '../market/lease-renewer.ts'
import type { Admission } from '../market/settlement.ts'
import { metrics } from '../metrics/gateway-metrics.ts'
import { formatMicros, type MicroDiem } from '../money/units.ts'
import type { UpstreamResponse } from '../upstream/client.ts'
import type { Dispatched } from './dispatch.ts'
import type { Usage } from './meter.ts'
import { type SettleDeps, type SettledChat, type Settlement, settle } from './settle.ts'
import { clockFor, type StreamClock } from './stream-clock.ts'
import { type ChatMessageLike, OutputTokenCounter } from './tokens.ts'
import { UpstreamEvents } from './upstream-events.ts'

export interface StreamTiming {
  /** A comment goes to the client after this long without a frame. */
  keepAliveMs: number
  /** The supplier is given up on after this long without a byte. */
  idleMs: number
  leaseMs: number
}

export interface StreamContext {
  deps: SettleDeps & { logger: Logger; renewer: LeaseRenewer }
  timing: StreamTiming
  chat: SettledChat
  messages: ChatMessageLike[]
  dispatched: Dispatched
  requestId: string
  supportReference: string
  /** Called once the stream has ended and settled (or failed to). */
  onFinish?: (result: { settlement: Settlement | null; error: string | null }) => void
}

// Frames are strings: the direct stream's sink encodes them as it writes, with no copy of our own.
const frame = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`
const KEEP_ALIVE = ': keep-alive\n\n'

export function sseError(code: string, message: string, type = 'api_error') {
  return frame({ error: { message, type, code } })
}

/** What one wire format does with the supplier's stream; the driver below does the rest. */
export interface StreamShape {
  /** Frames before the first content (the Responses preamble). */
  start?(): string[]
  /** The frame for one content chunk, or null to send nothing for it. */
  content(frame: string, delta: string): string | null
  /** The supplier's usage chunk, held until the clear commits. */
  usage?(chunk: Record<string, unknown>): void
  /** The closing frames once settled (null: the clear did not commit), and the error to log. */
  end(settlement: Settlement | null, complete: boolean): { frames: string[]; error: string | null }
}

/** Bun's controller of a `type: "direct"` stream (bun-types has it as a global interface). */
type Sink = ReadableStreamDirectController

/**
 * Relays one supplier stream in a wire format and settles it once: content as it comes, keep-alives
 * on silence, a stalled supplier given up on after the idle time, one settlement at the end or when
 * the client leaves. It is the direct stream's underlying source itself (`pull`, `cancel`), and it
 * keeps only what it needs of the request: the supplier's answer to read, not the dispatch record.
 */
class StreamRelay {
  readonly type = 'direct'
  private readonly deps: StreamContext['deps']
  private readonly timing: StreamTiming
  private readonly chat: SettledChat
  private readonly messages: ChatMessageLike[]
  private readonly admission: Admission
  private readonly preBalance: MicroDiem | null
  private readonly requestId: string
  private readonly onFinish: StreamContext['onFinish']
  /** The supplier's answer, read as it comes. */
  private readonly upstream: UpstreamResponse
  private readonly events: UpstreamEvents
  private readonly clock: StreamClock
  /** Made at the first text: a stream may end before any. */
  private counter: OutputTokenCounter | null = null
  private sink: Sink | null = null
  /** When the pending supplier read began (ms since the epoch); 0 when none is pending. */
  private waitingSince = 0
  private usage: Usage | null = null
  private settled: Promise<Settlement | null> | null = null
  /** Silence counted since the last content, and when the last silence was noticed. */
  private silentMs = 0
  private silenceAt = 0
  /** A keep-alive the client has not taken yet: no more silences are counted until it has. */
  private blocked = false
  /** The supplier read was cancelled (stall or client gone): what it brings is dropped. */
  private stopped = false
  private closed = false
  private cancelled = false

  constructor(
    ctx: StreamContext,
    private readonly shape: StreamShape,
  ) {
    this.deps = ctx.deps
    this.timing = ctx.timing
    this.chat = ctx.chat
    this.messages = ctx.messages
    this.admission = ctx.dispatched.admission
    this.preBalance = ctx.dispatched.preBalance
    this.requestId = ctx.requestId
    this.onFinish = ctx.onFinish
    this.upstream = ctx.dispatched.response
    this.events = new UpstreamEvents(ctx.dispatched.head)
    this.clock = clockFor(ctx.timing)
    metrics.openStreams.value += 1
    // The lease lives as long as the stream: renewed while it flows, so only a dead replica's is reaped.
    this.deps.renewer.add(this.admission.attemptId)
  }

  async pull(sink: Sink): Promise<void> {
    this.sink = sink
    if (this.shape.start) for (const f of this.shape.start()) sink.write(f)
    this.clock.add(this)
    try {
      for (;;) {
        const event = this.events.shift()
        if (event === undefined) {
          // Read on (inline, not in a method of its own: one async frame less held per stream).
          this.waitingSince = Date.now()
          let got: Uint8Array | null | undefined
          try {
            got = await this.upstream.read()
          } catch {
            got = undefined // the connection broke before the end
          }
          this.waitingSince = 0
          if (this.cancelled) return
          if (this.stopped) this.events.end('cut')
          else if (got === undefined) this.events.end('broken')
          else if (got === null) this.events.end('done')
          else this.events.push(got)
          continue
        }
        switch (event.kind) {
          case 'content': {
            this.silentMs = 0
            if (event.delta) {
              this.counter ??= new OutputTokenCounter()
              this.counter.add(event.delta)
            }
            const out = this.shape.content(event.frame, event.delta)
            // A client that is not taking what it was sent holds the supplier read back.
            const written = out === null ? 0 : sink.write(out)
            if (written instanceof Promise) await written
            if (this.cancelled) return
            break
          }
          case 'usage':
            this.usage = event.usage
            this.shape.usage?.(event.chunk)
            break
          case 'done':
            break
          case 'end':
            return await this.end(sink)
        }
      }
    } finally {
      this.clock.remove(this)
    }
  }

  private async end(sink: Sink): Promise<void> {
    this.clock.remove(this)
    const complete = this.usage !== null
    const settlement = await this.settle(complete ? 'completed' : 'incomplete')
    if (this.cancelled) return
    const { frames, error } = this.shape.end(settlement, complete)
    for (const f of frames) sink.write(f)
    this.finish(settlement, error)
    sink.close()
  }

  /** The client left: stop the supplier at once and bill what was generated. */
  async cancel(): Promise<void> {
    if (this.closed) return
    this.cancelled = true
    this.clock.remove(this)
    this.stop()
    const settlement = await this.settle(this.usage ? 'completed' : 'incomplete')
    this.finish(settlement, 'client_closed')
  }

  /** The clock's check, while the supplier is awaited: a keep-alive, or a stall given up on. */
  tick(now: number): void {
    const since = this.waitingSince
    if (since === 0 || this.blocked || this.closed || this.cancelled) return
    const wait = Math.min(this.timing.keepAliveMs, this.timing.idleMs - this.silentMs)
    if (now - Math.max(since, this.silenceAt) < wait) return
    this.silenceAt = now
    this.silentMs += wait
    if (this.silentMs >= this.timing.idleMs) {
      this.stop() // a stalled supplier is a truncated one: the pending read ends, then the settlement
      return
    }
    const written = this.sink!.write(KEEP_ALIVE)
    if (written instanceof Promise) {
      this.blocked = true
      written.then(() => {
        this.blocked = false
        this.silenceAt = Date.now()
      })
    }
  }

  /** Settles once, whatever calls it first (the end of the stream or the client leaving). */
  private settle(outcome: 'completed' | 'incomplete'): Promise<Settlement | null> {
    this.settled ??= this.commit(outcome)
    return this.settled
  }

  private async commit(outcome: 'completed' | 'incomplete'): Promise<Settlement | null> {
    metrics.openStreams.value -= 1
    this.deps.renewer.remove(this.admission.attemptId)
    try {
      return await settle(this.deps, {
        chat: this.chat,
        messages: this.messages,
        admission: this.admission,
        preBalance: this.preBalance,
        reported: this.usage,
        generatedTokens: () => this.counter?.total() ?? Promise.resolve(0),
        outcome,
      })
    } catch (error) {
      // Not committed: no charge. The lease is left to the reaper, which returns the hold.
      this.deps.logger.error(
        { requestId: this.requestId, err: (error as Error).message },
        'stream settlement failed',
      )
      return null
    }
  }

  /** Ends the supplier call: cancelling its body closes the connection, the pending read ends. */
  private stop(): void {
    if (this.stopped) return
    this.stopped = true
    this.deps.renewer.remove(this.admission.attemptId)
    this.upstream.cancel()
  }

  private finish(settlement: Settlement | null, error: string | null): void {
    this.closed = true
    this.onFinish?.({ settlement, error })
  }
}

/** One supplier stream relayed in a wire format, as a direct stream for the response body. */
export function relayStream(ctx: StreamContext, shape: StreamShape): ReadableStream<Uint8Array> {
  return new ReadableStream(new StreamRelay(ctx, shape) as unknown as Bun.DirectUnderlyingSource)
}

/** Chat SSE: the supplier's chunks as they are; then usage, the svc.cost frame and [DONE]. */
class ChatShape implements StreamShape {
  private usageChunk: Record<string, unknown> | null = null

  constructor(
    private readonly requestId: string,
    private readonly modelId: string,
    private readonly supportReference: string,
  ) {}

  content(raw: string): string {
    return `${raw}\n\n`
  }

  usage(chunk: Record<string, unknown>): void {
    this.usageChunk = chunk
  }

  end(settlement: Settlement | null, complete: boolean) {
    if (!settlement) {
      return {
        frames: [sseError('settle_failed', 'settlement did not commit; nothing was charged')],
        error: 'settle_failed',
      }
    }
    const frames: string[] = []
    if (this.usageChunk) frames.push(frame(this.usageChunk))
    frames.push(
      frame({
        id: `chatcmpl-${this.requestId.slice(4)}`,
        object: 'svc.cost',
        created: Math.floor(Date.now() / 1000),
        model: this.modelId,
        choices: [],
        costUsdc: formatMicros(settlement.charged),
        clearingPriceCents: settlement.askCents,
        supportReference: this.supportReference,
      }),
    )
    if (complete) {
      frames.push('data: [DONE]\n\n')
      return { frames, error: null }
    }
    frames.push(
      sseError(
        'stream_incomplete',
        'the stream ended before the provider reported usage; estimated usage was billed',
      ),
    )
    return { frames, error: 'stream_incomplete' }
  }
}

export function relayChatStream(ctx: StreamContext): ReadableStream<Uint8Array> {
  return relayStream(ctx, new ChatShape(ctx.requestId, ctx.chat.model.id, ctx.supportReference))
}
