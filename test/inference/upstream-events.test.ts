// The supplier's SSE parsed frame by frame, however its bytes are cut.
import { describe, expect, test } from 'bun:test'
import { type UpstreamEvent, UpstreamEvents } from '../../src/inference/upstream-events.ts'

function readerOf(chunks: string[]): ReadableStreamDefaultReader<Uint8Array> {
  const encoder = new TextEncoder()
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(encoder.encode(c))
      controller.close()
    },
  }).getReader() as ReadableStreamDefaultReader<Uint8Array>
}

async function all(chunks: string[]): Promise<UpstreamEvent[]> {
  const events = new UpstreamEvents(readerOf(chunks))
  const out: UpstreamEvent[] = []
  for (;;) {
    const e = await events.next(1_000)
    out.push(e)
    if (e.kind === 'end') return out
  }
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

  test('whole frames, comments skipped', async () => {
    expect(kinds(await all([stream]))).toEqual(expected)
  })

  test('cut at every byte', async () => {
    expect(kinds(await all(stream.split('')))).toEqual(expected)
  })

  test('CRLF line ends, cut between CR and LF', async () => {
    const crlf = stream.replaceAll('\n', '\r\n')
    const cut = crlf.indexOf('\r\n\r\n') + 1
    expect(kinds(await all([crlf.slice(0, cut), crlf.slice(cut)]))).toEqual(expected)
  })

  test('usage riding on the last content chunk is split off and held', async () => {
    const both =
      'data: {"choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}\n\n'
    const events = await all([both])
    expect(kinds(events)).toEqual(['content:x', 'usage:1', 'end'])
    expect((events[0] as { frame: string }).frame).not.toContain('usage')
  })

  test('a malformed frame is dropped, not relayed', async () => {
    expect(kinds(await all(['data: {not json\n\n', `${content('ok')}\n\n`]))).toEqual(['content:ok', 'end'])
  })
})
