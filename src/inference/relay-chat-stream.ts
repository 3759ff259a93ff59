// Streamed chat's wire format: the supplier's chunks as they are; then the usage chunk, the svc.cost
// frame and [DONE] once the clear commits; the error frame that replaces [DONE] when it did not.
import { formatMicros } from '../money/units.ts'
import { billedChatUsage } from './chat-usage.ts'
import {
  frame,
  relayStream,
  type StreamClearing,
  type StreamContext,
  type StreamShape,
  sseError,
  unknownOutcomeMessage,
} from './relay-stream.ts'
import type { StreamIdentity } from './upstream-events.ts'

export const NOTHING_USABLE =
  'the provider ended the stream before any content; nothing was charged; safe to retry'

/** Chat SSE: the supplier's chunks as they are; then usage, the svc.cost frame and [DONE]. */
class ChatShape implements StreamShape {
  private usageChunk: Record<string, unknown> | null = null

  constructor(
    private readonly requestId: string,
    private readonly modelId: string,
    private readonly supportReference: string,
  ) {}

  /** The supplier's frame as it came (its blank line included). */
  content(frame: string): string {
    return frame
  }

  usage(chunk: Record<string, unknown> | null): void {
    this.usageChunk = chunk
  }

  end(clearing: StreamClearing, complete: boolean, identity: StreamIdentity | null) {
    const ref = { supportReference: this.supportReference }
    if (clearing === 'released') {
      return {
        frames: [sseError('provider_error', NOTHING_USABLE, 'api_error', ref)],
        error: 'provider_error',
      }
    }
    if (clearing === 'not_committed') {
      return {
        frames: [
          sseError('settle_failed', 'settlement did not commit; nothing was charged', 'api_error', ref),
        ],
        error: 'settle_failed',
      }
    }
    if (clearing === 'unknown') {
      const message = unknownOutcomeMessage(this.supportReference)
      return {
        frames: [sseError('store_unavailable', message, 'api_error', ref)],
        error: 'store_unavailable',
      }
    }
    const frames: string[] = []
    // The usage chunk and the cost frame belong to the stream's own completion: its id, created and
    // model, so a client that joins chunks by id (openai-node's stream helpers) keeps one completion.
    const own = {
      id: identity?.id ?? `chatcmpl-${this.requestId.slice(4)}`,
      created: identity?.created ?? Math.floor(Date.now() / 1000),
      model: identity?.model ?? this.modelId,
    }
    // Its usage the one billed, which is the supplier's unless it reported more than the request allows.
    const chunk = this.usageChunk
    if (chunk) frames.push(frame({ ...chunk, ...own, usage: billedChatUsage(chunk.usage, clearing.usage) }))
    frames.push(
      frame({
        ...own,
        object: 'svc.cost',
        choices: [],
        costUsdc: formatMicros(clearing.charged),
        clearingPriceCents: clearing.askCents,
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
