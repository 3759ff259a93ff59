// The supplier's SSE stream parsed frame by frame, as the relay feeds it the bytes it reads:
// content chunks (kept as their raw text, so the relay passes them through untouched), the usage
// chunk, [DONE], and the end. Memory stays at one partial frame.
import { readUsage, type Usage } from './meter.ts'

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

function deltaText(chunk: {
  choices?: { delta?: { content?: unknown; tool_calls?: unknown; reasoning_content?: unknown } }[]
}) {
  const delta = chunk.choices?.[0]?.delta
  if (!delta) return ''
  let text = typeof delta.content === 'string' ? delta.content : ''
  if (typeof delta.reasoning_content === 'string') text += delta.reasoning_content
  if (delta.tool_calls !== undefined) text += JSON.stringify(delta.tool_calls)
  return text
}

export class UpstreamEvents {
  private buffer = ''
  private carry: Uint8Array | null = null
  private started = false
  private readonly queue: UpstreamEvent[] = []

  constructor(head?: Uint8Array) {
    if (head) this.push(head)
  }

  /** The next event parsed so far, if any. */
  shift(): UpstreamEvent | undefined {
    return this.queue.shift()
  }

  /** Bytes read from the supplier. */
  push(bytes: Uint8Array): void {
    this.buffer += this.decode(bytes)
    // SSE allows CRLF line ends; fold them so frames split the same way (a CR left at the end of
    // one chunk meets its LF in the next).
    if (this.buffer.includes('\r\n')) this.buffer = this.buffer.replaceAll('\r\n', '\n')
    let cut = this.buffer.indexOf('\n\n')
    while (cut !== -1) {
      this.frame(this.buffer.slice(0, cut), this.buffer.slice(0, cut + 2))
      this.buffer = this.buffer.slice(cut + 2)
      cut = this.buffer.indexOf('\n\n')
    }
  }

  /**
   * The body is over: `done` counts a last frame left without its blank line; `broken` (the read
   * failed) and `cut` (the relay stopped reading) drop it.
   */
  end(how: 'done' | 'broken' | 'cut'): void {
    if (how === 'done' && this.buffer.trim() !== '') this.frame(this.buffer, `${this.buffer}\n\n`)
    this.buffer = ''
    this.queue.push({ kind: 'end', broken: how === 'broken' })
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
    let chunk: Record<string, unknown>
    try {
      chunk = JSON.parse(data) as Record<string, unknown>
    } catch {
      return // a malformed frame is dropped, not relayed
    }
    const usage = readUsage(chunk.usage)
    const choices = chunk.choices as unknown[] | undefined
    if (usage && (!choices || choices.length === 0)) {
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
    this.queue.push({ kind: 'content', frame: plain ? whole : `data: ${data}\n\n`, delta: deltaText(chunk) })
  }
}
