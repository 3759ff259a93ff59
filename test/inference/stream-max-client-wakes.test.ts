// A stream ended at SVC_STREAM_MAX_MS while the relay waits on a client that takes nothing: the
// end (its clear, then the closing frames) runs beside the relay's pending write. A client that
// starts reading again before that clear answers wakes the write; the relay must still wait for the
// end, since Bun closes a direct stream as soon as its pull returns, and closing frames written
// after that are lost: the client would see the stream stop on a content frame, not on the error.
// Gated, not timed: the client pauses inside a frame far larger than the sockets can hold (so the
// relay's write is pending when the stream's time comes), and the clear's reply is held by a proxy
// until the client has taken that whole frame.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import { SCRIPTS } from '../../src/redis/script-registry.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer, sseData } from '../helpers/buyers.ts'
import { dechunk } from '../helpers/raw-http.ts'
import { serverOf } from '../helpers/redis-cluster.ts'
import { type RedisProxy, startRedisProxy } from '../helpers/redis-proxy.ts'
import { onTestDatabase, startStack, type TestStack, testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { streamSurfaces } from '../helpers/trickling-supplier.ts'
import { until } from '../helpers/wait.ts'

/** The clear on the wire: the function's FCALL, or ioredis's EVALSHA of its script. */
const CLEAR = ['_clear\r\n', createHash('sha1').update(SCRIPTS.clear.lua).digest('hex')]
/** Ends the one huge frame, so the client knows it has taken all of it. */
const LAST_WORDS = 'and that was all'
/** Far more than a socket pair buffers for a client that reads nothing: the write stays pending. */
const HUGE = new TextEncoder().encode(
  `data: ${JSON.stringify({
    id: 'chatcmpl-w',
    object: 'chat.completion.chunk',
    model: 'llama-3.3-70b',
    choices: [{ index: 0, delta: { content: `${'and on '.repeat(1_200_000)}${LAST_WORDS}` } }],
  })}\n\n`,
)
/** What the client takes before it pauses: past the head and preamble, inside the huge frame. */
const PAUSE_AFTER = 64 * 1024

let stack: TestStack
let proxy: RedisProxy
let buyer: TestAccount
let supplier: ReturnType<typeof Bun.serve>
/** Supplier streams begun and not yet cancelled by the gateway. */
let open = 0

beforeAll(async () => {
  // The huge frame, then silence: the supplier never ends on its own.
  supplier = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    fetch() {
      let sent = false
      const body = new ReadableStream<Uint8Array>(
        {
          start() {
            open += 1
          },
          pull(controller) {
            if (sent) return new Promise<void>(() => {})
            sent = true
            controller.enqueue(HUGE)
          },
          cancel() {
            open -= 1
          },
        },
        { highWaterMark: 0 },
      )
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  // The gateway reaches Redis through a proxy that can hold the clear's reply (on a Cluster, in
  // front of the master that holds the stack's keys); no reaper call may share the clear's write.
  const prefix = testPrefix()
  const target = new URL(await serverOf(testRedisUrl(), prefix))
  proxy = startRedisProxy({ host: target.hostname, port: Number(target.port) })
  stack = await startStack({
    prefix,
    env: {
      REDIS_URL: onTestDatabase(proxy.url),
      SVC_REAP_INTERVAL_MS: '60000',
      // Time for a busy machine to read, parse and start writing the huge frame before the end.
      SVC_STREAM_MAX_MS: '5000',
      SVC_STREAM_IDLE_MS: '600000',
      SVC_KEEPALIVE_MS: '100',
      SVC_MAX_UPSTREAM_FRAME_BYTES: String(32 * 1024 * 1024),
    },
  })
  await postOffer(stack, `http://127.0.0.1:${supplier.port}`, 40)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  proxy.stop()
  supplier.stop(true)
})

/** A streamed request on a socket of its own, whose reading the test pauses and resumes. */
async function pausableStream(path: string, body: unknown) {
  const json = Buffer.from(JSON.stringify({ ...(body as object), stream: true }))
  const { hostname, port, host } = new URL(stack.url)
  const chunks: Buffer[] = []
  let received = 0
  let tail = ''
  let tookAll = false
  let pausedOnce = false
  const closed = Promise.withResolvers<void>()
  const socket = await Bun.connect({
    hostname,
    port: Number(port),
    socket: {
      data(s, data) {
        chunks.push(Buffer.from(data))
        received += data.length
        const text = tail + Buffer.from(data).toString('latin1')
        if (text.includes(LAST_WORDS)) tookAll = true
        tail = text.slice(-LAST_WORDS.length)
        if (received < PAUSE_AFTER || pausedOnce) return
        pausedOnce = true
        s.pause()
      },
      close: () => closed.resolve(),
      error: () => closed.resolve(),
    },
  })
  const head = [
    `POST ${path} HTTP/1.1`,
    `Host: ${host}`,
    'Connection: close',
    `Authorization: Bearer ${buyer.apiKey}`,
    'Content-Type: application/json',
    `Content-Length: ${json.length}`,
  ]
  socket.write(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`), json]))
  return {
    paused: () => pausedOnce,
    tookAll: () => tookAll,
    resume: () => socket.resume(),
    /** The SSE body once the connection closed, its chunked framing taken off. */
    async text(): Promise<string> {
      await closed.promise
      const answer = Buffer.concat(chunks)
      return dechunk(answer.subarray(answer.indexOf('\r\n\r\n') + 4)).toString('utf8')
    },
  }
}

const surfaces = streamSurfaces('go on', 8_000)

type Ending = { error?: { code: string }; response?: { incomplete_details: { reason: string } } }

describe('a client that reads again while its stream is ended at SVC_STREAM_MAX_MS', () => {
  for (const [surface, { path, body }] of Object.entries(surfaces)) {
    test(surface, async () => {
      proxy.holdReplyOf(CLEAR)
      const client = await pausableStream(path, body)
      // Paused inside the huge frame: the relay waits on that write when the stream's time comes.
      await until(() => client.paused())
      // The supplier is let go and the clear has run; its reply (the end's next step) is held.
      await until(() => open === 0)
      await proxy.fired()
      // The client takes everything it was sent, waking the relay's write, before the clear answers.
      client.resume()
      await until(() => client.tookAll())
      proxy.letReplies()
      const text = await client.text()
      const last = sseData(text).at(-1) as Ending
      expect(
        last.error?.code ?? last.response?.incomplete_details.reason,
        `the last frame: ${JSON.stringify(last).slice(0, 300)}`,
      ).toBe('stream_incomplete')
      await until(async () => (await balances(stack, buyer.accountId)).held === 0)
    }, 60_000)
  }
})
