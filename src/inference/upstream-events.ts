// The supplier's SSE stream, read frame by frame: content chunks (kept as their raw text, so the
// relay passes them through untouched), the usage chunk, [DONE], the end, and silences (so the
// relay can send keep-alives and notice a stall). Memory stays at one partial frame.
import { readUsage, type Usage } from './meter.ts'

export type UpstreamEvent =
  | { kind: 'content'; frame: string; delta: string }
  | { kind: 'usage'; usage: Usage; chunk: Record<string, unknown> }
  | { kind: 'done' }
  | { kind: 'end'; broken: boolean }
  | { kind: 'silence' }

type Read = { value?: Uint8Array; done: boolean } | { failed: true }

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
  private readonly decoder = new TextDecoder()
  private buffer = ''
  private readonly queue: UpstreamEvent[] = []
  private pending: Promise<Read> | null = null
  private ended = false
  private broken = false

  constructor(
    private readonly reader: ReadableStreamDefaultReader<Uint8Array>,
    head?: Uint8Array,
  ) {
    if (head) this.push(head)
  }

  private push(bytes: Uint8Array): void {
    this.buffer += this.decoder.decode(bytes, { stream: true })
    // SSE allows CRLF line ends; fold them so frames split the same way (a CR left at the end of
    // one chunk meets its LF in the next).
    if (this.buffer.includes('\r\n')) this.buffer = this.buffer.replaceAll('\r\n', '\n')
    let cut = this.buffer.indexOf('\n\n')
    while (cut !== -1) {
      this.frame(this.buffer.slice(0, cut))
      this.buffer = this.buffer.slice(cut + 2)
      cut = this.buffer.indexOf('\n\n')
    }
  }

  private frame(raw: string): void {
    const text = raw.replaceAll('\r', '')
    let data = ''
    for (const line of text.split('\n')) {
      if (line.startsWith('data:')) data += line.slice(line[5] === ' ' ? 6 : 5)
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
        frame: `data: ${JSON.stringify(content)}`,
        delta: deltaText(content),
      })
      this.queue.push({ kind: 'usage', usage, chunk: { ...chunk, choices: [] } })
      return
    }
    this.queue.push({ kind: 'content', frame: `data: ${data}`, delta: deltaText(chunk) })
  }

  /** The next event; `silence` when none came within `waitMs` (the read stays pending). */
  async next(waitMs: number): Promise<UpstreamEvent> {
    while (this.queue.length === 0) {
      if (this.ended) return { kind: 'end', broken: this.broken }
      this.pending ??= this.reader.read().then(
        (r) => r as Read,
        () => ({ failed: true }) as Read,
      )
      let timer: Timer | undefined
      const silence = new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), waitMs)
      })
      const got = await Promise.race([this.pending, silence])
      clearTimeout(timer)
      if (got === null) return { kind: 'silence' }
      this.pending = null
      if ('failed' in got) {
        this.ended = true
        this.broken = true
      } else if (got.done || !got.value) {
        this.ended = true
        if (this.buffer.trim() !== '') this.frame(this.buffer)
      } else {
        this.push(got.value)
      }
    }
    return this.queue.shift()!
  }

  cancel(): void {
    this.ended = true
    this.reader.cancel().catch(() => {})
  }
}
