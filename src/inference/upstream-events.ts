// The supplier's SSE stream parsed frame by frame, as the relay feeds it the bytes it reads:
// content chunks (kept as their raw text, so the relay passes them through untouched), the usage
// chunk, [DONE], and the end. Frames are parsed as they are taken: a read that brings many (a
// burst) has its first one relayed before the others are parsed. Memory stays at what one read
// brought, and the frame left incomplete at its end is bounded.
//
// The supplier is not trusted with the client's stream: only chat.completion.chunk objects with a
// `choices` array pass (nothing may pass for the gateway's own svc.cost frame), and the gateway's
// own cost fields are taken off them. A supplier's error frame means it broke: the stream ends
// there, as a truncated one (billed on estimate, `stream_incomplete`). So does a frame that is not
// complete within the bound.
import { contentPieces } from './content-parts.ts'
import { readPromptUsage, readUsage, type Usage } from './meter.ts'

export type UpstreamEvent =
  /** `frame` is the whole SSE frame to pass on, its blank line included. */
  | { kind: 'content'; frame: string; delta: string }
  | { kind: 'usage'; usage: Usage; chunk: Record<string, unknown> }
  | { kind: 'done' }
  | { kind: 'end'; broken: boolean }

// One decoder for every stream, used without its streaming state: each stream keeps only the
// bytes of a character cut between two reads (`carry`). The BOM is stripped by hand, at the start.
const decoder = new TextDecoder('utf-8', { ignoreBOM: true })

/** How many bytes at the end of `bytes` begin a UTF-8 character that the next read completes. */
function cutCharacter(bytes: Uint8Array): number {
  const n = bytes.length
  for (let back = 1; back <= 3 && back <= n; back++) {
    const byte = bytes[n - back]!
    if ((byte & 0xc0) === 0x80) continue // a continuation byte: look further back for the lead
    const length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1
    return length > back ? back : 0
  }
  return 0
}

/** A stream chunk's delta or a buffered answer's message: what the supplier generated in it. */
export type Generated = {
  content?: unknown
  refusal?: unknown
  tool_calls?: unknown
  reasoning_content?: unknown
  reasoning?: unknown
}

/**
 * The text, refusal, reasoning and tool calls generated in one delta or message, as the tokenizer
 * counts them when no usage comes; a null is nothing generated. Reasoning under either name
 * suppliers use for it, as the facades show it; content given as parts counts its text and thinking.
 */
export function generatedText(part: Generated | undefined | null): string {
  if (!part) return ''
  let text = ''
  if (typeof part.content === 'string') text += part.content
  else if (Array.isArray(part.content)) for (const piece of contentPieces(part.content)) text += piece.text
  if (typeof part.refusal === 'string') text += part.refusal
  if (typeof part.reasoning_content === 'string') text += part.reasoning_content
  else if (typeof part.reasoning === 'string') text += part.reasoning
  if (part.tool_calls != null) text += callsText(part.tool_calls)
  return text
}

/**
 * What a model generated in tool calls: each call's name and arguments. The chunk's scaffolding
 * (`index`, `id`, `type`, the keys and quotes around the arguments) is the supplier's framing, not
 * output: counted, it made a streamed call's estimate many times what was generated, each piece of
 * arguments wrapped in some ten tokens of JSON. A list that is no list is counted whole.
 */
function callsText(calls: unknown): string {
  if (!Array.isArray(calls)) return JSON.stringify(calls)
  let text = ''
  for (const call of calls) {
    const fn = call !== null && typeof call === 'object' ? (call as { function?: unknown }).function : null
    if (fn === null || typeof fn !== 'object') continue
    const { name, arguments: args } = fn as { name?: unknown; arguments?: unknown }
    if (typeof name === 'string') text += name
    if (typeof args === 'string') text += args
    else if (args != null) text += JSON.stringify(args)
  }
  return text
}

/** The text a chunk generated, across every choice (a request with `n` streams them interleaved). */
function deltaText(chunk: { choices?: { delta?: Generated }[] }) {
  const choices = chunk.choices
  if (!choices) return ''
  let text = ''
  for (const choice of choices) text += generatedText(choice?.delta)
  return text
}

/** Fields of the gateway's own frames (svc.cost): never taken from a supplier. */
const OWN_FIELDS = ['costUsdc', 'clearingPriceCents', 'supportReference']

function withoutOwnFields(chunk: Record<string, unknown>): Record<string, unknown> {
  if (!OWN_FIELDS.some((name) => name in chunk)) return chunk
  const copy = { ...chunk }
  for (const name of OWN_FIELDS) delete copy[name]
  return copy
}

/** What names a stream's chunks: a client takes a chunk with another id for another completion. */
export interface StreamIdentity {
  id: unknown
  created: unknown
  model: unknown
}

export class UpstreamEvents {
  /** The first content chunk's id, created and model: the frames the gateway adds carry them too. */
  identity: StreamIdentity | null = null
  /**
   * The last usage the supplier reported, kept when more content makes it stale, or its prompt side
   * alone when it had no completion count: the prompt the upstream counted bills an estimate.
   */
  lastReport: Usage | null = null
  /** Text read and not parsed yet: whole frames not taken yet, then the frame not complete yet. */
  private buffer = ''
  /** The bytes of the frame not complete yet, counted as they arrive (once `counted`). */
  private partialBytes = 0
  /** Whether `partialBytes` counts what the buffer holds (a frame parsed off it leaves it stale). */
  private counted = true
  private carry: Uint8Array | null = null
  /**
   * Text read after `buffer` with no frame end in it, kept apart: a frame trickled in small reads is
   * joined once, when its end comes, not searched and copied whole at every read (quadratic).
   */
  private parts: string[] = []
  /** Whether `buffer` and `parts` may hold a frame end not parsed yet. */
  private unsearched = false
  /** The last character appended, for a blank line split between two reads. */
  private lastChar = ''
  /** A CR held back from the end of a read: the next one may bring its LF. */
  private heldCR = false
  private started = false
  private sawFrame = false
  /** The end is queued: nothing after it is parsed. */
  private over = false
  private readonly queue: UpstreamEvent[] = []

  constructor(
    /** How many bytes a frame may take before its blank line; past it, the stream ends broken. */
    private readonly maxFrameBytes: number,
    head?: Uint8Array,
    /** The model the buyer bought, which chunks name in place of the supplier's name for it. */
    private readonly model?: string,
  ) {
    if (head) this.push(head)
  }

  /**
   * The stream broke (an error frame, a frame past the bound) or ended (a body with no SSE frame in
   * it: a JSON error under a 200) before any content, usage or [DONE] was parsed.
   */
  brokeBeforeContent(): boolean {
    return this.queue[0]?.kind === 'end'
  }

  /** Whether a whole frame (a comment too) or the end has been parsed. */
  framed(): boolean {
    return this.sawFrame || this.over
  }

  /** The next event, parsed off what was read when none is waiting; undefined when more must be read. */
  shift(): UpstreamEvent | undefined {
    if (this.queue.length === 0 && !this.over) this.parse(true)
    return this.queue.shift()
  }

  /** Bytes read from the supplier: parsed up to the first event they bring, the rest as it is taken. */
  push(bytes: Uint8Array): void {
    if (this.over) return
    if (this.counted) this.partialBytes += bytes.length
    let text = this.decode(bytes)
    // SSE allows CRLF line ends; fold them so frames split the same way (a CR left at the end of
    // one read is held back until the next brings its LF, or not).
    if (this.heldCR) {
      text = `\r${text}`
      this.heldCR = false
    }
    if (text.endsWith('\r')) {
      this.heldCR = true
      text = text.slice(0, -1)
    }
    if (text.includes('\r\n')) text = text.replaceAll('\r\n', '\n')
    if (text !== '') {
      if (text.includes('\n\n') || (text.charCodeAt(0) === 10 && this.lastChar === '\n'))
        this.unsearched = true
      this.lastChar = text[text.length - 1]!
      this.parts.push(text)
    }
    this.parse(true)
  }

  /** The text read, in one string. */
  private join(): void {
    if (this.parts.length === 0) return
    this.buffer += this.parts.length === 1 ? this.parts[0]! : this.parts.join('')
    this.parts = []
  }

  /**
   * The body is over: every whole frame read goes first; then `done` counts a last frame left
   * without its blank line; `broken` (the read failed) and `cut` (the relay stopped reading) drop it.
   */
  end(how: 'done' | 'broken' | 'cut'): void {
    if (this.over) return
    this.parse(false)
    if (this.over) return
    this.join()
    if (this.heldCR) this.buffer += '\r'
    if (how === 'done' && this.buffer.trim() !== '') this.frame(this.buffer, `${this.buffer}\n\n`)
    this.finish(how === 'broken')
  }

  /**
   * Parses whole frames off the buffer, until one queues an event (`untilEvent`) or none is left;
   * then the frame left incomplete is held to the bound.
   */
  private parse(untilEvent: boolean): void {
    let cut = -1
    if (this.unsearched) {
      this.join()
      cut = this.buffer.indexOf('\n\n')
      this.unsearched = cut !== -1
    }
    while (cut !== -1 && !this.over) {
      this.frame(this.buffer.slice(0, cut), this.buffer.slice(0, cut + 2))
      this.buffer = this.buffer.slice(cut + 2)
      this.counted = false
      if (untilEvent && this.queue.length > 0) return
      cut = this.buffer.indexOf('\n\n')
      this.unsearched = cut !== -1
    }
    if (this.over) return
    if (!this.counted) {
      this.partialBytes = Buffer.byteLength(this.buffer)
      this.counted = true
    }
    if (this.partialBytes > this.maxFrameBytes) this.finish(true)
  }

  /** Queues the end, once; what is left of a frame is dropped. */
  private finish(broken: boolean): void {
    if (this.over) return
    this.over = true
    this.buffer = ''
    this.parts = []
    this.heldCR = false
    this.partialBytes = 0
    this.carry = null
    this.queue.push({ kind: 'end', broken })
  }

  private decode(bytes: Uint8Array): string {
    if (this.carry) {
      const joined = new Uint8Array(this.carry.length + bytes.length)
      joined.set(this.carry)
      joined.set(bytes, this.carry.length)
      bytes = joined
      this.carry = null
    }
    const cut = cutCharacter(bytes)
    if (cut > 0) {
      this.carry = bytes.slice(bytes.length - cut)
      bytes = bytes.subarray(0, bytes.length - cut)
    }
    let text = decoder.decode(bytes)
    if (!this.started && text !== '') {
      this.started = true
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
    }
    return text
  }

  /** One frame: `raw` without its blank line, `whole` with it (passed on as it came when it can be). */
  private frame(raw: string, whole: string): void {
    this.sawFrame = true
    let data = ''
    // The common frame is one `data: ` line: its text is passed on as it is, no copy made.
    const plain = raw.startsWith('data: ') && !raw.includes('\n') && !raw.includes('\r')
    if (plain) data = raw.slice(6)
    else {
      for (const line of raw.replaceAll('\r', '').split('\n')) {
        if (line.startsWith('data:')) data += line.slice(line[5] === ' ' ? 6 : 5)
      }
    }
    if (data === '') return // comments and keep-alives stay upstream
    if (data === '[DONE]') {
      this.queue.push({ kind: 'done' })
      return
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(data)
    } catch {
      return // a malformed frame is dropped, not relayed
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return
    let chunk = parsed as Record<string, unknown>
    if (chunk.error !== undefined && chunk.error !== null) {
      this.finish(true) // the supplier broke mid-stream
      return
    }
    if (chunk.object !== undefined && chunk.object !== 'chat.completion.chunk') return
    const usage = readUsage(chunk.usage)
    this.lastReport = usage ?? readPromptUsage(chunk.usage) ?? this.lastReport
    const choices = chunk.choices
    if (!Array.isArray(choices)) {
      // A usage chunk is relayed later as a chunk of its own, with an empty `choices`.
      if (usage) this.queue.push({ kind: 'usage', usage, chunk: { ...withoutOwnFields(chunk), choices: [] } })
      return
    }
    const clean = withoutOwnFields(chunk)
    // Passed on as it came only when its text says what it parsed to: one `object` key, none of ours.
    let asItCame = plain && clean === chunk && data.indexOf('"object"') === data.lastIndexOf('"object"')
    chunk = clean
    // The supplier's own name for the model (a vendor path, a dated build) is not what the buyer
    // bought: such chunks are written again (as cheap as a splice of their text, measured); one
    // that names it already passes as it came.
    if (this.model !== undefined && chunk.model !== this.model) {
      asItCame = false
      chunk = { ...chunk, model: this.model }
    }
    this.identity ??= { id: chunk.id, created: chunk.created, model: chunk.model }
    if (usage && choices.length === 0) {
      this.queue.push({ kind: 'usage', usage, chunk })
      return
    }
    if (usage) {
      // Usage riding on a content chunk: the content goes on now, the usage waits for the clear.
      const { usage: _held, ...content } = chunk
      this.queue.push({
        kind: 'content',
        frame: `data: ${JSON.stringify(content)}\n\n`,
        delta: deltaText(content),
      })
      this.queue.push({ kind: 'usage', usage, chunk: { ...chunk, choices: [] } })
      return
    }
    this.queue.push({
      kind: 'content',
      frame: asItCame ? whole : `data: ${JSON.stringify(chunk)}\n\n`,
      delta: deltaText(chunk),
    })
  }
}

/** One choice of a supplier's chat chunk, as the wire formats read it. */
export type ChunkChoice = Record<string, unknown> & {
  delta?: Record<string, unknown>
  finish_reason?: unknown
}

/** The first choice of a content frame's chunk, or null when it has none (or is not JSON). */
export function firstChoice(frame: string): ChunkChoice | null {
  let chunk: { choices?: ChunkChoice[] }
  try {
    chunk = JSON.parse(frame.slice(frame.indexOf('{'), frame.lastIndexOf('}') + 1))
  } catch {
    return null
  }
  return chunk.choices?.[0] ?? null
}
