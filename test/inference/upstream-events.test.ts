// The supplier's SSE parsed frame by frame, however its bytes are cut.
import { describe, expect, test } from 'bun:test'
import { type UpstreamEvent, UpstreamEvents } from '../../src/inference/upstream-events.ts'

/** Feeds the parser the chunks as separate reads, then the end of the body. */
function all(chunks: string[]): UpstreamEvent[] {
  const encoder = new TextEncoder()
  const events = new UpstreamEvents()
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
    const events = new UpstreamEvents()
    for (const byte of bytes) events.push(Uint8Array.of(byte))
    const event = events.shift() as { kind: string; delta: string; frame: string }
    expect(event.kind).toBe('content')
    expect(event.delta).toBe(text)
    expect(event.frame).toBe(`${content(text)}\n\n`)
  })

  test('a malformed frame is dropped, not relayed', () => {
    expect(kinds(all(['data: {not json\n\n', `${content('ok')}\n\n`]))).toEqual(['content:ok', 'end'])
  })
})
