// The supplier's SSE parsed frame by frame, however its bytes are cut.
import { describe, expect, test } from 'bun:test'
import { type UpstreamEvent, UpstreamEvents } from '../../src/inference/upstream-events.ts'

const FRAME_BYTES = 64 * 1024

/** Feeds the parser the chunks as separate reads, then the end of the body. */
function all(chunks: string[]): UpstreamEvent[] {
  const encoder = new TextEncoder()
  const events = new UpstreamEvents(FRAME_BYTES)
  const out: UpstreamEvent[] = []
  const drain = () => {
    for (let e = events.shift(); e; e = events.shift()) out.push(e)
  }
  for (const c of chunks) {
    events.push(encoder.encode(c))
    drain()
  }
  events.end('done')
  drain()
  return out
}

const content = (text: string) =>
  `data: {"choices":[{"index":0,"delta":{"content":${JSON.stringify(text)}}}]}`
const usage = 'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}'

describe('upstream SSE', () => {
  const stream = `${content('he')}\n\n: keep-alive\n\n${content('llo')}\n\n${usage}\n\ndata: [DONE]\n\n`
  const expected = ['content:he', 'content:llo', 'usage:2', 'done', 'end']
  const kinds = (events: UpstreamEvent[]) =>
    events.map((e) =>
      e.kind === 'content'
        ? `content:${e.delta}`
        : e.kind === 'usage'
          ? `usage:${e.usage.completionTokens}`
          : e.kind,
    )

  test('whole frames, comments skipped', () => {
    expect(kinds(all([stream]))).toEqual(expected)
  })

  test('cut at every byte', () => {
    expect(kinds(all(stream.split('')))).toEqual(expected)
  })

  test('CRLF line ends, cut between CR and LF', () => {
    const crlf = stream.replaceAll('\n', '\r\n')
    const cut = crlf.indexOf('\r\n\r\n') + 1
    expect(kinds(all([crlf.slice(0, cut), crlf.slice(cut)]))).toEqual(expected)
  })

  test('CRLF line ends cut at every byte', () => {
    expect(kinds(all(stream.replaceAll('\n', '\r\n').split('')))).toEqual(expected)
  })

  test('a CR that no LF follows is no line end, whichever read it ends', () => {
    const frame = `${content('a')}\r \n\n`
    const at = frame.indexOf('\r') + 1
    expect(kinds(all([frame.slice(0, at), frame.slice(at)]))).toEqual(['content:a', 'end'])
    expect(kinds(all([`${content('a')}\n\r`]))).toEqual(['content:a', 'end'])
  })

  test('a frame trickled in 16-byte reads is held whole, to the byte its bound refuses', () => {
    const bound = 64 * 1024
    const events = new UpstreamEvents(
      bound,
      new TextEncoder().encode('data: {"choices":[{"delta":{"content":"'),
    )
    const piece = new Uint8Array(16).fill(0x61)
    let reads = 0
    while (events.shift() === undefined) {
      events.push(piece)
      reads++
    }
    expect(reads).toBeGreaterThan(bound / 16 - 8)
    expect(events.shift()).toBeUndefined()
  })

  test('usage riding on the last content chunk is split off and held', () => {
    const both =
      'data: {"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}\n\n'
    const events = all([both])
    expect(kinds(events)).toEqual(['content:x', 'usage:1', 'end'])
    expect((events[0] as { frame: string }).frame).not.toContain('usage')
  })

  test('characters of several bytes cut between reads come through whole', () => {
    const text = 'héllo wörld, 世界 😀'
    const bytes = new TextEncoder().encode(`${content(text)}\n\n`)
    const events = new UpstreamEvents(FRAME_BYTES)
    for (const byte of bytes) events.push(Uint8Array.of(byte))
    const event = events.shift() as { kind: string; delta: string; frame: string }
    expect(event.kind).toBe('content')
    expect(event.delta).toBe(text)
    expect(event.frame).toBe(`${content(text)}\n\n`)
  })

  test('a malformed frame is dropped, not relayed', () => {
    expect(kinds(all(['data: {not json\n\n', `${content('ok')}\n\n`]))).toEqual(['content:ok', 'end'])
  })

  test('a frame not complete within the bound ends the stream broken; what follows is not parsed', () => {
    const events = new UpstreamEvents(1024, new TextEncoder().encode(`${content('ok')}\n\ndata: {"choices":`))
    for (let i = 0; i < 3; i++) events.push(new Uint8Array(400).fill(0x61))
    events.push(new TextEncoder().encode(`\n\n${content('late')}\n\n`))
    events.end('done')
    const out: UpstreamEvent[] = []
    for (let e = events.shift(); e; e = events.shift()) out.push(e)
    expect(kinds(out)).toEqual(['content:ok', 'end'])
    expect(out.at(-1)).toEqual({ kind: 'end', broken: true })
  })

  test('frames of up to the bound pass, however their bytes are cut', () => {
    const text = 'x'.repeat(900)
    const frame = `${content(text)}\n\n`
    const events = new UpstreamEvents(Buffer.byteLength(frame))
    const bytes = new TextEncoder().encode(frame.repeat(3))
    for (let at = 0; at < bytes.length; at += 7) events.push(bytes.subarray(at, at + 7))
    const deltas: string[] = []
    for (let e = events.shift(); e; e = events.shift()) if (e.kind === 'content') deltas.push(e.delta)
    expect(deltas).toEqual([text, text, text])
  })

  test('only chat chunks with a choices array pass: nothing else may pass for svc.cost', () => {
    const frames = [
      `data: ${JSON.stringify({ object: 'svc.cost', choices: [], costUsdc: '0.000000' })}`,
      `data: ${JSON.stringify({ object: 'chat.completion', choices: [{ index: 0, delta: { content: 'no' } }] })}`,
      'data: {"object":"chat.completion.chunk"}',
      'data: [1,2]',
      'data: null',
      'data: "text"',
      content('yes'),
    ]
    expect(kinds(all([frames.map((f) => `${f}\n\n`).join('')]))).toEqual(['content:yes', 'end'])
  })

  test("the gateway's own cost fields come off a chunk and off the usage chunk", () => {
    const events = all([
      `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'a' } }], costUsdc: '0', supportReference: 'sr_x' })}\n\n`,
      `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 1 }, clearingPriceCents: 1 })}\n\n`,
    ])
    expect(kinds(events)).toEqual(['content:a', 'usage:1', 'end'])
    const relayed = JSON.stringify(events)
    for (const field of ['costUsdc', 'supportReference', 'clearingPriceCents'])
      expect(relayed).not.toContain(field)
  })

  test('a chunk whose text names `object` twice is passed on as it parsed, not as it came', () => {
    const [event] = all(['data: {"object":"svc.cost","object":"chat.completion.chunk","choices":[]}\n\n'])
    expect(event).toMatchObject({
      kind: 'content',
      frame: 'data: {"object":"chat.completion.chunk","choices":[]}\n\n',
    })
  })

  test("a supplier's error frame ends the stream broken: nothing after it, usage included, is taken", () => {
    const events = all([
      `${content('a')}\n\ndata: {"error":{"message":"x"}}\n\n${content('b')}\n\n${usage}\n\n`,
    ])
    expect(kinds(events)).toEqual(['content:a', 'end'])
    expect(events.at(-1)).toEqual({ kind: 'end', broken: true })
  })
})

test('a chunk of several choices counts the text of every choice (n > 1 is estimated in full)', () => {
  const events = new UpstreamEvents(FRAME_BYTES)
  const chunk = {
    object: 'chat.completion.chunk',
    choices: [
      { index: 0, delta: { content: 'ab' } },
      { index: 1, delta: { content: 'cd', reasoning_content: 'e' } },
    ],
  }
  events.push(new TextEncoder().encode(`data: ${JSON.stringify(chunk)}\n\n`))
  const event = events.shift() as { kind: string; delta: string }
  expect(event).toMatchObject({ kind: 'content', delta: 'abcde' })
})

describe("the supplier's name for the model gives way to the buyer's", () => {
  const frameOf = (sse: string, model?: string) => {
    const events = new UpstreamEvents(FRAME_BYTES, new TextEncoder().encode(sse), model)
    return (events.shift() as { frame: string }).frame
  }
  const theirs = (rest: string) => `data: {"id":"c","model":"vendor/llama-v3p3","choices":[${rest}]}\n\n`
  const delta = (text: string) => `{"index":0,"delta":{"content":${JSON.stringify(text)}}}`

  test("written again with the buyer's model, its content untouched", () => {
    const frame = frameOf(theirs(`${delta('model')},${delta('"model"')}`), 'llama-3.3-70b')
    const chunk = JSON.parse(frame.slice(6)) as { model: string; choices: { delta: { content: string } }[] }
    expect(chunk.model).toBe('llama-3.3-70b')
    expect(chunk.choices.map((c) => c.delta.content)).toEqual(['model', '"model"'])
    expect(frame.endsWith('}\n\n')).toBe(true)
  })

  test('a frame already naming the model, or a parser told no model, passes as it came', () => {
    const ours = 'data: {"model":"llama-3.3-70b","choices":[{"delta":{"content":"a"}}]}\n\n'
    expect(frameOf(ours, 'llama-3.3-70b')).toBe(ours)
    expect(frameOf(theirs(delta('a')))).toBe(theirs(delta('a')))
  })
})
