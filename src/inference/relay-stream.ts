// A supplier stream relayed in a wire format (relay-chat-stream.ts, relay-responses.ts): content
// passes through as it comes; the supplier's usage waits for the clear, then the format's closing
// frames. A stream that ends without usage is billed on estimate, one with no text and no usage is
// released (nothing charged). A clear that loses the store is tried again for `clearWaitMs`, the
// client kept open with keep-alives; one refused by its script ends with `settle_failed` (nothing
// charged), one still unheard with `store_unavailable` (and is sent later). The client stream is
// Bun's direct stream: frames are written straight to the response, no queue; a write the client is not taking
// is awaited before the supplier is read again (backpressure). One object per stream holds the
// state: per open stream, memory is what counts.
import type { Logger } from 'pino'
import type { Admission } from '../market/admission.ts'
import type { LeaseRenewer } from '../market/lease-renewer.ts'
import { metrics } from '../metrics/gateway-metrics.ts'
import type { MicroDiem } from '../money/units.ts'
import { isRedisUnavailable } from '../redis/connection.ts'
import { waitsFor, whileStoreAway } from '../redis/store-retry.ts'
import type { UpstreamResponse } from '../upstream/client.ts'
import { type ClearDeps, type ClearedChat, type ClearedUsage, clearUsage } from './clear-usage.ts'
import type { Dispatched } from './dispatch.ts'
import type { Usage } from './meter.ts'
import { clockFor, type StreamClock } from './stream-clock.ts'
import { type ChatMessageLike, OutputTokenCounter } from './tokens.ts'
import type { StreamIdentity, UpstreamEvents } from './upstream-events.ts'

export interface StreamTiming {
  /** A comment goes to the client after this long without a frame. */
  keepAliveMs: number
  /** The supplier is given up on after this long without content (comments and usage are none). */
  idleMs: number
  /** The supplier is given up on once its stream is open this long, however it flows. */
  maxMs: number
  leaseMs: number
  /** A clear that lost the store is tried again this long before the stream ends without knowing. */
  clearWaitMs: number
}

export interface StreamContext {
  /** `cooldownMs`: how long an offer whose stream brought nothing usable is passed over. */
  deps: ClearDeps & { logger: Logger; renewer: LeaseRenewer; cooldownMs: number }
  timing: StreamTiming
  chat: ClearedChat
  messages: ChatMessageLike[]
  /** The prompt fields sent beside the messages, for the estimate of a stream without usage. */
  promptFields: Record<string, unknown>
  dispatched: Dispatched
  requestId: string
  supportReference: string
  /** Called once the stream has ended and cleared (or failed to). */
  onFinish?: (result: { clearing: ClearedUsage | null; error: string | null }) => void
}

// Frames are strings: the direct stream's sink encodes them as it writes, with no copy of our own.
export const frame = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`
const KEEP_ALIVE = ': keep-alive\n\n'

export function sseError(
  code: string,
  message: string,
  type = 'api_error',
  extra: Record<string, unknown> = {},
) {
  return frame({ error: { message, type, code, ...extra } })
}

/**
 * How a stream's clear ended: committed (what it charged), refused by its script (nothing was
 * charged), unknown (the store stayed away: the reply of a clear that ran may have been lost), or
 * released (the supplier sent nothing usable: no text and no usage; nothing was charged).
 */
export type StreamClearing = ClearedUsage | 'not_committed' | 'unknown' | 'released'

/** What a client is told when its stream's outcome could not be learnt, and where to look. */
export function unknownOutcomeMessage(supportReference: string): string {
  return (
    'the gateway lost its store while settling and cannot tell whether this request was charged; ' +
    `GET /v1/agent/requests/${supportReference} says, once the store is back`
  )
}

/** What one wire format does with the supplier's stream; the driver below does the rest. */
export interface StreamShape {
  /** Frames before the first content (the Responses preamble, Messages' message_start). */
  start?(): string[] | Promise<string[]>
  /** The frame sent on silence, when the format has its own (else an SSE comment). */
  keepAlive?: string
  /** The frame for one content chunk, or null to send nothing for it. */
  content(frame: string, delta: string): string | null
  /** The supplier's usage chunk, or null when what it reported no longer counts all that was sent. */
  usage?(chunk: Record<string, unknown> | null): void
  /** The closing frames once cleared, and the error to log. */
  end(
    clearing: StreamClearing,
    complete: boolean,
    identity: StreamIdentity | null,
  ): { frames: string[]; error: string | null }
}

/**
 * Relays one supplier stream in a wire format and clears it once: content as it comes, keep-alives
 * on silence, a stalled supplier given up on after the idle time, one clearing at the end or when
 * the client leaves. It is the direct stream's underlying source itself (`pull`, `cancel`), and it
 * keeps only what it needs of the request: the supplier's answer to read, not the dispatch record.
 */
class StreamRelay {
  readonly type = 'direct'
  private readonly deps: StreamContext['deps']
  private readonly timing: StreamTiming
  private readonly chat: ClearedChat
  private readonly messages: ChatMessageLike[]
  private readonly promptFields: Record<string, unknown>
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
  private sink: ReadableStreamDirectController | null = null
  /** When the pending supplier read began (ms since the epoch); 0 when none is pending. */
  private waitingSince = 0
  private usage: Usage | null = null
  private cleared: Promise<StreamClearing> | null = null
  /** Silence counted since the last content, and when the last silence was noticed. */
  private silentMs = 0
  private silenceAt = 0
  /** When the supplier was first read after its last content; 0: at the next read. */
  private heardAt = 0
  private readonly startedAt = Date.now()
  /** When the client was last sent a frame, as the clock saw it; 0: just now, not seen yet. */
  private sentAt = 0
  /** A keep-alive the client has not taken yet: no more silences are counted until it has. */
  private blocked = false
  /** The supplier is done and the clear is being tried: the client waits on us, not on it. */
  private awaitingClear = false
  /** The supplier read was cancelled (stall or client gone): what it brings is dropped. */
  private stopped = false
  private closed = false
  private cancelled = false
  /** The first content frame has been flushed to the client. */
  private firstSent = false
  /** The end (clear, closing frames), run once; pull() returns after it: its return closes the stream. */
  private ending: Promise<void> | null = null

  constructor(
    ctx: StreamContext,
    private readonly shape: StreamShape,
  ) {
    this.deps = ctx.deps
    this.timing = ctx.timing
    this.chat = ctx.chat
    this.messages = ctx.messages
    this.promptFields = ctx.promptFields
    this.admission = ctx.dispatched.admission
    this.preBalance = ctx.dispatched.preBalance
    this.requestId = ctx.requestId
    this.onFinish = ctx.onFinish
    this.upstream = ctx.dispatched.response
    this.events = ctx.dispatched.events!
    this.clock = clockFor(ctx.timing)
    metrics.openStreams.value += 1
    // The lease lives as long as the stream: renewed while it flows, so only a dead replica's is reaped.
    this.deps.renewer.add(this.admission)
  }

  async pull(sink: ReadableStreamDirectController): Promise<void> {
    this.sink = sink
    // Awaited only for a count (Messages): a pull that yields before writing sends the head alone.
    const started = this.shape.start?.() ?? []
    const opening = started instanceof Promise ? await started : started
    if (this.cancelled) return
    for (const f of opening) sink.write(f)
    this.clock.add(this)
    try {
      for (;;) {
        const event = this.events.shift()
        if (event === undefined) {
          // Read on (inline, not in a method of its own: one async frame less held per stream).
          this.waitingSince = Date.now()
          if (this.heardAt === 0) this.heardAt = this.waitingSince
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
            if (event.delta) {
              this.silentMs = 0
              this.heardAt = 0 // silence starts again at the next read
              this.counter ??= new OutputTokenCounter(this.chat.maxTokens * this.chat.choices)
              this.counter.add(event.delta)
              // Usage reported before more was generated (on a content chunk, as a supplier that
              // reports as it goes does) no longer counts it all: only a later report makes the
              // stream complete; cut before one, it is billed on the estimate.
              if (this.usage !== null) {
                this.usage = null
                this.shape.usage?.(null)
              }
            }
            const out = this.shape.content(event.frame, event.delta)
            if (out === null) break
            // A client that is not taking what it was sent holds the supplier read back.
            const written = sink.write(out)
            this.sentAt = 0
            if (written instanceof Promise) await written
            else if (!this.firstSent) {
              // The head and the first frame go out now, in one write: the frames read with it
              // (a whole burst, often) would otherwise hold them back until they are all relayed.
              this.firstSent = true
              const flushed = sink.flush()
              if (flushed instanceof Promise) await flushed
            }
            if (this.cancelled) return
            if (this.ending) return await this.ending // ended by the clock while the client was awaited
            break
          }
          case 'usage':
            // No progress: a report sent again and again must not keep a stream with no content open.
            this.usage = event.usage
            this.shape.usage?.(event.chunk)
            break
          // The supplier's [DONE] is its stream's end, whether or not it closes the connection:
          // a supplier that keeps it open must not hold the client (and the hold) to the idle time.
          case 'done':
          case 'end':
            return await this.end(sink)
        }
      }
    } catch (error) {
      // A frame this format could not write (a supplier's shape it did not foresee) breaks the
      // stream, as a supplier's break does: settled on what was generated, never left held.
      if (this.ending || this.cancelled) throw error
      this.deps.logger.error(
        { requestId: this.requestId, err: (error as Error).message },
        'stream relay failed',
      )
      this.usage = null
      this.shape.usage?.(null)
      return await this.end(sink)
    } finally {
      this.clock.remove(this)
    }
  }

  private end(sink: ReadableStreamDirectController): Promise<void> {
    this.ending ??= this.windUp(sink)
    return this.ending
  }

  private async windUp(sink: ReadableStreamDirectController): Promise<void> {
    // Ended by what the supplier sent (an error frame, a frame past the bound): its call ends too.
    this.upstream.cancel()
    const complete = this.usage !== null
    // Keep-alives go on while the clear is tried (the clock stays on until pull() returns).
    this.awaitingClear = true
    this.waitingSince = Date.now()
    const clearing = await this.clearOnce(complete ? 'completed' : 'incomplete')
    this.waitingSince = 0
    this.clock.remove(this)
    if (this.cancelled) return
    const { frames, error } = this.shape.end(clearing, complete, this.events.identity)
    for (const f of frames) sink.write(f)
    this.finish(clearing, error)
    sink.close()
  }

  /** The client left: stop the supplier at once and bill what was generated. */
  async cancel(): Promise<void> {
    if (this.closed) return
    this.cancelled = true
    this.clock.remove(this)
    this.stop()
    const clearing = await this.clearOnce(this.usage ? 'completed' : 'incomplete')
    this.finish(clearing, clearing === 'unknown' ? 'store_unavailable' : 'client_closed')
  }

  /** The clock's check: a stream past its time; keep-alives and stalls while the supplier or clear waits. */
  tick(now: number): void {
    if (this.closed || this.cancelled) return
    if (!this.awaitingClear && now - this.startedAt >= this.timing.maxMs) return void this.giveUp()
    if (this.waitingSince === 0 || this.blocked) return
    if (this.sentAt === 0) this.sentAt = now
    if (!this.awaitingClear) {
      const wait = Math.min(this.timing.keepAliveMs, this.timing.idleMs - this.silentMs)
      // From the last content, not byte: a trickle of comments or empty chunks must not hold it.
      if (now - Math.max(this.heardAt, this.silenceAt) >= wait) {
        this.silenceAt = now
        this.silentMs += wait
        if (this.silentMs >= this.timing.idleMs) return void this.stop() // stalled: cut, then cleared
      }
    }
    // Timed from what the client was sent: a supplier's comments are bytes, but none reach it.
    if (now - this.sentAt < this.timing.keepAliveMs) return
    this.sentAt = now
    const written = this.sink!.write(this.shape.keepAlive ?? KEEP_ALIVE)
    if (written instanceof Promise) {
      this.blocked = true
      // A client gone while the comment waited rejects it: ended as its leaving ends it, not unhandled.
      written.then(
        () => {
          this.blocked = false
          this.silenceAt = Date.now()
        },
        () => {},
      )
    }
  }

  /** Past its time: a read ends cut, then the stream; an unread write (maybe for ever) is not awaited. */
  private giveUp(): void {
    this.stop()
    if (this.waitingSince !== 0 || this.ending) return
    this.end(this.sink!).catch((e: Error) => this.deps.logger.error({ err: e.message }, 'stream end failed'))
  }

  /** Settles once, whatever calls it first (the end of the stream or the client leaving). */
  private clearOnce(outcome: 'completed' | 'incomplete'): Promise<StreamClearing> {
    this.cleared ??= this.commit(outcome)
    return this.cleared
  }

  private async commit(outcome: 'completed' | 'incomplete'): Promise<StreamClearing> {
    metrics.openStreams.value -= 1
    try {
      // No text and no usage is nothing delivered, not paid for; a client that left had its prompt read.
      if (this.usage === null && this.counter === null && !this.cancelled) return await this.releaseUnusable()
      return await clearUsage(this.deps, {
        chat: this.chat,
        messages: this.messages,
        promptFields: this.promptFields,
        admission: this.admission,
        preBalance: this.preBalance,
        reported: this.usage,
        partial: this.events.lastReport,
        generatedTokens: (count) => this.counter?.total(count) ?? Promise.resolve(0),
        outcome,
        // The clear (its counts too) is idempotent and the client is still here: tried while it may wait.
        storeWaitsMs: waitsFor(this.timing.clearWaitMs),
        delivered: true,
      })
    } catch (error) {
      // Refused: its lease is left to the reaper. Unheard: sent again later (clear-usage.ts).
      const unknown = isRedisUnavailable(error)
      this.deps.logger.error(
        { requestId: this.requestId, err: (error as Error).message, outcomeKnown: !unknown },
        unknown ? 'stream clearing unknown: store unavailable' : 'stream clearing failed',
      )
      return unknown ? 'unknown' : 'not_committed'
    } finally {
      // Renewed while the clear is tried, so a long wait for the store is not taken for a dead replica.
      this.deps.renewer.remove(this.admission.attemptId)
    }
  }

  /** Releases the hold with nothing charged, the offer cooled down as after any supplier failure. */
  private async releaseUnusable(): Promise<'released'> {
    await whileStoreAway(
      () =>
        this.deps.steps.release(this.admission, {
          errorCode: 'upstream_no_content',
          cooldownMs: this.deps.cooldownMs,
          upstreamBalance: null,
          final: true,
          recordRetentionMs: this.deps.recordRetentionMs,
        }),
      waitsFor(this.timing.clearWaitMs),
    )
    return 'released'
  }

  /** Ends the supplier call: cancelling its body closes the connection, the pending read ends. */
  private stop(): void {
    if (this.stopped) return
    this.stopped = true
    this.upstream.cancel()
  }

  private finish(clearing: StreamClearing, error: string | null): void {
    this.closed = true
    this.onFinish?.({ clearing: typeof clearing === 'string' ? null : clearing, error })
  }
}

/** One supplier stream relayed in a wire format, as a direct stream for the response body. */
export function relayStream(ctx: StreamContext, shape: StreamShape): ReadableStream<Uint8Array> {
  return new ReadableStream(new StreamRelay(ctx, shape) as unknown as Bun.DirectUnderlyingSource)
}
