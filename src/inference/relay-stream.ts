// Streamed chat: content chunks pass through as they come; the supplier's usage chunk and [DONE]
// wait for the clear; then the usage chunk, the svc.cost frame, [DONE]. A stream that ends
// without usage is billed on estimate, gets its cost frame, then the error `stream_incomplete`.
// The client stream is pull-driven, so a slow client slows the supplier read (backpressure).
import type { Logger } from 'pino'
import type { LeaseRenewer } from '../market/lease-renewer.ts'
import { metrics } from '../metrics/gateway-metrics.ts'
import { formatMicros } from '../money/units.ts'
import type { AdmittedChat } from './chat-request.ts'
import type { Dispatched } from './dispatch.ts'
import type { Usage } from './meter.ts'
import { type SettleDeps, type Settlement, settle } from './settle.ts'
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
  chat: AdmittedChat
  messages: ChatMessageLike[]
  dispatched: Dispatched
  requestId: string
  supportReference: string
  /** Aborts the supplier call (client gone, stall). */
  abortUpstream: () => void
  /** Called once the stream has ended and settled (or failed to). */
  onFinish?: (result: { settlement: Settlement | null; error: string | null }) => void
}

const encoder = new TextEncoder()
const frame = (data: unknown) => encoder.encode(`data: ${JSON.stringify(data)}\n\n`)

/** Drives one upstream stream to its settlement; shared by the chat and Responses relays. */
export class StreamSettler {
  readonly events: UpstreamEvents
  readonly counter = new OutputTokenCounter()
  private usage: Usage | null = null
  private settled: Promise<Settlement | null> | null = null
  private readonly renewer: LeaseRenewer

  constructor(private readonly ctx: StreamContext) {
    metrics.openStreams.value += 1
    this.events = new UpstreamEvents(ctx.dispatched.reader!, ctx.dispatched.head)
    // The lease lives as long as the stream: renewed while it flows, so only a dead replica's is reaped.
    this.renewer = ctx.deps.renewer
    this.renewer.add(ctx.dispatched.admission.attemptId)
  }

  noteUsage(usage: Usage): void {
    this.usage = usage
  }

  /** Settles once, whatever calls it first (the end of the stream or the client leaving). */
  settle(outcome: 'completed' | 'incomplete'): Promise<Settlement | null> {
    this.settled ??= (async () => {
      metrics.openStreams.value -= 1
      this.renewer.remove(this.ctx.dispatched.admission.attemptId)
      try {
        return await settle(this.ctx.deps, {
          chat: this.ctx.chat,
          messages: this.ctx.messages,
          admission: this.ctx.dispatched.admission,
          preBalance: this.ctx.dispatched.preBalance,
          reported: this.usage,
          generatedTokens: this.usage ? 0 : this.counter.total(),
          outcome,
        })
      } catch (error) {
        // Not committed: no charge. The lease is left to the reaper, which returns the hold.
        this.ctx.deps.logger.error(
          { requestId: this.ctx.requestId, err: (error as Error).message },
          'stream settlement failed',
        )
        return null
      }
    })()
    return this.settled
  }

  get hasUsage(): boolean {
    return this.usage !== null
  }

  stop(): void {
    this.renewer.remove(this.ctx.dispatched.admission.attemptId)
    this.events.cancel()
    this.ctx.abortUpstream()
  }
}

export function sseError(code: string, message: string, type = 'api_error') {
  return frame({ error: { message, type, code } })
}

/** What one wire format does with the supplier's stream; the driver below does the rest. */
export interface StreamShape {
  /** Frames before the first content (the Responses preamble). */
  start?(): Uint8Array[]
  /** The frame for one content chunk, or null to send nothing for it. */
  content(frame: string, delta: string): Uint8Array | null
  /** The supplier's usage chunk, held until the clear commits. */
  usage?(chunk: Record<string, unknown>): void
  /** The closing frames once settled (null: the clear did not commit), and the error to log. */
  end(settlement: Settlement | null, complete: boolean): { frames: Uint8Array[]; error: string | null }
}

/**
 * Relays one supplier stream in a wire format: content as it comes (pull-driven, so a slow client
 * slows the supplier read), keep-alives on silence, a stalled supplier given up on after the idle
 * time, one settlement at the end or when the client leaves.
 */
export function relayStream(ctx: StreamContext, shape: StreamShape): ReadableStream<Uint8Array> {
  const settler = new StreamSettler(ctx)
  let started = !shape.start
  let silentMs = 0
  let closed = false
  let cancelled = false

  const finish = (settlement: Settlement | null, error: string | null) => {
    closed = true
    ctx.onFinish?.({ settlement, error })
  }

  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!started) {
        started = true
        for (const f of shape.start!()) controller.enqueue(f)
        return
      }
      for (;;) {
        // Wake for the next keep-alive, or sooner when the idle limit comes first: a stall must be
        // noticed at the idle time, not at the next keep-alive after it.
        const wait = Math.min(ctx.timing.keepAliveMs, ctx.timing.idleMs - silentMs)
        const event = await settler.events.next(wait)
        if (cancelled) return
        switch (event.kind) {
          case 'content': {
            silentMs = 0
            if (event.delta) settler.counter.add(event.delta)
            const out = shape.content(event.frame, event.delta)
            if (!out) continue
            controller.enqueue(out)
            return
          }
          case 'usage':
            settler.noteUsage(event.usage)
            shape.usage?.(event.chunk)
            continue
          case 'done':
            continue
          case 'silence':
            silentMs += wait
            if (silentMs >= ctx.timing.idleMs) {
              settler.stop() // a stalled supplier is a truncated one
              continue
            }
            controller.enqueue(encoder.encode(': keep-alive\n\n'))
            return
          case 'end': {
            const complete = settler.hasUsage
            const settlement = await settler.settle(complete ? 'completed' : 'incomplete')
            if (cancelled) return
            const { frames, error } = shape.end(settlement, complete)
            for (const f of frames) controller.enqueue(f)
            finish(settlement, error)
            controller.close()
            return
          }
        }
      }
    },
    async cancel() {
      // The client left: stop the supplier at once and bill what was generated.
      if (closed) return
      cancelled = true
      settler.stop()
      const settlement = await settler.settle(settler.hasUsage ? 'completed' : 'incomplete')
      finish(settlement, 'client_closed')
    },
  })
}

/** Chat SSE: the supplier's chunks as they are; then usage, the svc.cost frame and [DONE]. */
export function relayChatStream(ctx: StreamContext): ReadableStream<Uint8Array> {
  let usageChunk: Record<string, unknown> | null = null
  return relayStream(ctx, {
    content: (raw) => encoder.encode(`${raw}\n\n`),
    usage: (chunk) => {
      usageChunk = chunk
    },
    end(settlement, complete) {
      if (!settlement) {
        return {
          frames: [sseError('settle_failed', 'settlement did not commit; nothing was charged')],
          error: 'settle_failed',
        }
      }
      const frames: Uint8Array[] = []
      if (usageChunk) frames.push(frame(usageChunk))
      frames.push(
        frame({
          id: `chatcmpl-${ctx.requestId.slice(4)}`,
          object: 'svc.cost',
          created: Math.floor(Date.now() / 1000),
          model: ctx.chat.model.id,
          choices: [],
          costUsdc: formatMicros(settlement.charged),
          clearingPriceCents: settlement.askCents,
          supportReference: ctx.supportReference,
        }),
      )
      if (complete) {
        frames.push(encoder.encode('data: [DONE]\n\n'))
        return { frames, error: null }
      }
      frames.push(
        sseError(
          'stream_incomplete',
          'the stream ended before the provider reported usage; estimated usage was billed',
        ),
      )
      return { frames, error: 'stream_incomplete' }
    },
  })
}
