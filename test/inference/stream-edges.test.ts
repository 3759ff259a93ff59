// Streams whose supplier misbehaves at the edges, from a scripted supplier on a raw socket to raw-socket
// clients: the supplier's [DONE] ends the stream even when it keeps its connection open (nothing
// after it relayed), and a 200 that ends before any SSE frame (a JSON error, a gzip-coded body)
// falls forward like a failure before any byte, at no charge.
import { afterAll, beforeAll, beforeEach, expect, test } from 'bun:test'
import type { Socket } from 'bun'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, simOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

/** One supplier call: the script writes what it likes, when it likes. */
type Script = (io: SupplierIo) => Promise<void>
interface SupplierIo {
  write(text: string | Buffer): Promise<void>
  end(): void
  closed: () => boolean
  sent: () => number
}

let script: Script
const supplierCalls: { sent: number; closed: boolean }[] = []

function scriptedSupplier() {
  type Data = {
    received: Buffer
    drain: (() => void) | null
    closed: boolean
    call: { sent: number; closed: boolean }
  }
  const listener = Bun.listen<Data>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(s) {
        s.data = { received: Buffer.alloc(0), drain: null, closed: false, call: { sent: 0, closed: false } }
      },
      data(s, bytes) {
        s.data.received = Buffer.concat([s.data.received, bytes])
        const end = s.data.received.indexOf('\r\n\r\n')
        if (end < 0) return
        const head = s.data.received.subarray(0, end).toString('latin1')
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0)
        if (s.data.received.length < end + 4 + length) return
        s.data.received = Buffer.alloc(0)
        supplierCalls.push(s.data.call)
        const io: SupplierIo = {
          async write(text) {
            let buf = typeof text === 'string' ? Buffer.from(text) : text
            while (buf.length > 0) {
              if (s.data.closed) return
              const n = s.write(buf)
              if (n > 0) {
                s.data.call.sent += n
                buf = buf.subarray(n)
              }
              if (buf.length > 0) await new Promise<void>((r) => (s.data.drain = r))
            }
          },
          end: () => s.end(),
          closed: () => s.data.closed,
          sent: () => s.data.call.sent,
        }
        script(io).catch(() => {})
      },
      drain(s) {
        const d = s.data.drain
        s.data.drain = null
        d?.()
      },
      close(s) {
        s.data.closed = true
        s.data.call.closed = true
        s.data.drain?.()
      },
      error(s) {
        s.data.closed = true
        s.data.call.closed = true
        s.data.drain?.()
      },
    },
  })
  return { url: `http://127.0.0.1:${listener.port}`, stop: () => listener.stop(true) }
}

let stack: TestStack
let supplier: ReturnType<typeof scriptedSupplier>
let buyer: TestAccount

beforeAll(async () => {
  supplier = scriptedSupplier()
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: { upstreamBaseUrl: supplier.url, upstreamApiKey: 'k', askCents: 33, capacityDiem: '50' },
  })
  expect(offer.status).toBe(201)
  await simOffer(stack, 48)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop()
})
beforeEach(() => {
  supplierCalls.length = 0
})

const SSE_HEAD = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n'
const chunk = (content: string) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-h',
    object: 'chat.completion.chunk',
    model: 'llama-3.3-70b',
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
  })}\n\n`
const USAGE = { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 }
const usageChunk = `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [], usage: USAGE })}\n\n`

const body = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    model: 'llama-3.3-70b',
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 64,
    stream: true,
    ...extra,
  })

/** A raw-socket client: what it received, and control over reading. */
async function _rawClient(payload = body()) {
  const url = new URL(stack.url)
  let received = Buffer.alloc(0)
  let closed = false
  const socket: Socket<undefined> = await Bun.connect({
    hostname: url.hostname,
    port: Number(url.port),
    socket: {
      data(_s, bytes) {
        received = Buffer.concat([received, bytes])
      },
      close() {
        closed = true
      },
      error() {
        closed = true
      },
    },
  })
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${buyer.apiKey}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
  )
  return {
    socket,
    text: () => received.toString('utf8'),
    bytes: () => received.length,
    closed: () => closed,
  }
}

async function heldZero() {
  await until(async () => (await balances(stack, buyer.accountId)).held === 0)
}

/** A whole streamed chat through fetch: its frames, and the bill checked against svc.cost. */
async function streamed(extra: Record<string, unknown> = {}) {
  const before = await balances(stack, buyer.accountId)
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: body(extra),
  })
  const text = await response.text()
  await heldZero()
  const after = await balances(stack, buyer.accountId)
  return {
    status: response.status,
    text,
    frames: sseData(text),
    charged: before.confirmed - after.confirmed,
    response,
  }
}

const costOf = (frames: (Record<string, unknown> | string)[]) =>
  frames.find((f) => typeof f === 'object' && f.object === 'svc.cost') as
    | { costUsdc: string; clearingPriceCents: number }
    | undefined
const errorOf = (frames: (Record<string, unknown> | string)[]) =>
  (frames.find((f) => typeof f === 'object' && 'error' in f) as { error: { code: string } } | undefined)
    ?.error.code

test('a 200 whose body is a JSON error, not SSE: it ended before any frame, so it falls forward at no charge', async () => {
  const err = JSON.stringify({ error: { message: 'overloaded', code: 'overloaded' } })
  script = async (io) => {
    await io.write(
      `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${err.length}\r\n\r\n${err}`,
    )
  }
  const r = await streamed()
  expect(r.status).toBe(200)
  // Served by the honest backup (ask 48), billed for it and nothing else; never provider_error.
  expect(errorOf(r.frames)).toBeUndefined()
  expect(costOf(r.frames)?.clearingPriceCents).toBe(48)
  expect(r.frames.at(-1)).toBe('[DONE]')
  const reference = r.response.headers.get('x-svc-support-reference')!
  const record = (await attemptsOf(reference)) as { attempts: { errorCode: string | null }[] }
  expect(record.attempts.map((a) => a.errorCode)).toEqual(['upstream_stream_error', null])
})

test("the supplier's [DONE] ends the stream, even when the supplier keeps its connection open", async () => {
  let hold!: () => void
  const held = new Promise<void>((r) => (hold = r))
  script = async (io) => {
    await io.write(`${SSE_HEAD + chunk('hi') + usageChunk}data: [DONE]\n\n`)
    await held // the connection stays open after [DONE], as a keep-alive supplier's may
    io.end()
  }
  try {
    const r = await streamed()
    expect(r.frames.at(-1)).toBe('[DONE]')
    expect(costOf(r.frames)?.clearingPriceCents).toBe(33)
    expect(supplierCalls[0]!.closed).toBe(true) // the gateway ended the call, not the supplier
  } finally {
    hold()
  }
}, 20000)

test('usage split over two chunks is no usage (estimate); nothing after [DONE] is relayed', async () => {
  const partial = `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 5 } })}\n\n`
  const rest = `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [], usage: { completion_tokens: 2 } })}\n\n`
  script = async (io) => {
    await io.write(
      `${SSE_HEAD + chunk('hi') + partial + rest}data: [DONE]\n\ndata: [DONE]\n\n${chunk('after')}`,
    )
    io.end()
  }
  const r = await streamed()
  expect(r.text).not.toContain('after')
  expect(errorOf(r.frames)).toBe('stream_incomplete')
  expect(costOf(r.frames)?.costUsdc).toBe((r.charged / 1e6).toFixed(6))
  expect(r.charged).toBeGreaterThan(0)
})

async function attemptsOf(reference: string) {
  const response = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
  return (await response.json()) as Record<string, unknown>
}

test('a gzip-encoded stream (content- or transfer-coding) is not relayed as garbage: it falls forward at no charge', async () => {
  const sse = Buffer.from(`${chunk('hello') + usageChunk}data: [DONE]\n\n`)
  const gz = Buffer.from(Bun.gzipSync(sse))
  for (const head of [
    `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\nconnection: close\r\n\r\n`,
    `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: gzip, chunked\r\n\r\n`,
  ]) {
    script = async (io) => {
      const chunked = head.includes('chunked')
      await io.write(head)
      await io.write(
        chunked
          ? Buffer.concat([Buffer.from(`${gz.length.toString(16)}\r\n`), gz, Buffer.from('\r\n0\r\n\r\n')])
          : gz,
      )
      io.end()
    }
    const r = await streamed()
    expect(errorOf(r.frames)).toBeUndefined()
    expect(costOf(r.frames)?.clearingPriceCents).toBe(48)
  }
})
