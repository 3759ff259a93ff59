// readCapped: a body read whole up to its cap and refused past it, the stream cancelled unread.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readCapped } from '../src/read-capped.ts'
import { until } from './helpers/wait.ts'

class TooLarge extends Error {}
const tooLarge = () => new TooLarge('too large')

/** A stream of these pieces, one per pull; it records how many were pulled and a cancel. */
function piecesStream(pieces: Uint8Array[]) {
  const seen = { pulled: 0, cancelled: false }
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        const piece = pieces[seen.pulled++]
        if (piece === undefined) controller.close()
        else controller.enqueue(piece)
      },
      cancel() {
        seen.cancelled = true
      },
    },
    { highWaterMark: 0 },
  )
  return { stream, seen }
}

const bytes = (n: number, fill = 0x61) => new Uint8Array(n).fill(fill)

describe('readCapped', () => {
  test('under the cap: every piece, joined in order', async () => {
    const { stream, seen } = piecesStream([bytes(3, 0x61), bytes(4, 0x62), bytes(2, 0x63)])
    const read = await readCapped(stream, 10, tooLarge)
    expect(read.toString('latin1')).toBe('aaabbbbcc')
    expect(seen.cancelled).toBe(false)
  })

  test('exactly at the cap: read whole', async () => {
    const { stream, seen } = piecesStream([bytes(6), bytes(4)])
    expect((await readCapped(stream, 10, tooLarge)).length).toBe(10)
    expect(seen.cancelled).toBe(false)
  })

  test('an empty body is an empty buffer', async () => {
    const { stream } = piecesStream([])
    expect((await readCapped(stream, 10, tooLarge)).length).toBe(0)
  })

  test("one byte past the cap: the caller's error, the stream cancelled, nothing more pulled", async () => {
    const { stream, seen } = piecesStream([bytes(6), bytes(5), bytes(100), bytes(100)])
    await expect(readCapped(stream, 10, tooLarge)).rejects.toBeInstanceOf(TooLarge)
    await until(() => seen.cancelled)
    expect(seen.pulled).toBe(2)
  })

  test('one piece past the cap on its own is refused', async () => {
    const { stream, seen } = piecesStream([bytes(11)])
    await expect(readCapped(stream, 10, tooLarge)).rejects.toBeInstanceOf(TooLarge)
    await until(() => seen.cancelled)
  })
})

describe('readCapped over HTTP, a body without Content-Length', () => {
  // Each response streams: sent chunked, so only the bytes themselves say how long it is.
  const served = { cancelled: false }
  let server: ReturnType<typeof Bun.serve>
  beforeAll(() => {
    server = Bun.serve({
      port: 0,
      fetch(request) {
        const { pathname } = new URL(request.url)
        if (pathname === '/short') {
          const { stream } = piecesStream([bytes(700), bytes(300)])
          return new Response(stream)
        }
        // Endless: a piece per pull, until the reader goes away.
        return new Response(
          new ReadableStream<Uint8Array>({
            pull(controller) {
              controller.enqueue(bytes(1024))
            },
            cancel() {
              served.cancelled = true
            },
          }),
        )
      },
    })
  })
  afterAll(() => server.stop(true))

  test('a chunked body exactly at the cap is read whole', async () => {
    const response = await fetch(new URL('/short', server.url))
    expect(response.headers.get('content-length')).toBeNull()
    expect((await readCapped(response.body!, 1000, tooLarge)).length).toBe(1000)
  })

  test('an endless chunked body is refused at the cap, and the sender stops', async () => {
    const response = await fetch(new URL('/endless', server.url))
    expect(response.headers.get('content-length')).toBeNull()
    await expect(readCapped(response.body!, 64 * 1024, tooLarge)).rejects.toBeInstanceOf(TooLarge)
    await until(() => served.cancelled)
  })
})
