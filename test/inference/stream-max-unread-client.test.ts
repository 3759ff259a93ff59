// A buyer whose client stops taking the stream (its socket not read: the gateway's writes wait) is
// held to SVC_STREAM_MAX_MS all the same: the supplier's call is ended, the stream cleared on its
// estimate and the hold and slots let go while the client still reads nothing, and the closing
// frames wait behind what it was sent. Waiting on the client, the relay reads no supplier, so only
// the bound on the whole stream can end it: unbounded, an unread socket kept the hold, the offer's
// slot and the supplier's call for as long as the buyer liked.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type IncomingMessage, request } from 'node:http'
import type { TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { streamSurfaces } from '../helpers/trickling-supplier.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyer: TestAccount
let supplier: ReturnType<typeof Bun.serve>
let offerId: string
/** Supplier streams begun and not yet cancelled by the gateway. */
let open = 0

// Large frames, as fast as the gateway reads them: the client's socket fills at once.
const FRAME = new TextEncoder().encode(
  `data: ${JSON.stringify({
    id: 'chatcmpl-u',
    object: 'chat.completion.chunk',
    model: 'llama-3.3-70b',
    choices: [{ index: 0, delta: { content: 'and on '.repeat(2_000) } }],
  })}\n\n`,
)

beforeAll(async () => {
  supplier = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    fetch() {
      const body = new ReadableStream<Uint8Array>(
        {
          start() {
            open += 1
          },
          pull(controller) {
            controller.enqueue(FRAME)
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
  stack = await startStack({
    // Only the stream's bound can end it: the supplier never stalls.
    env: { SVC_STREAM_MAX_MS: '1000', SVC_STREAM_IDLE_MS: '600000', SVC_KEEPALIVE_MS: '100' },
  })
  offerId = (await postOffer(stack, `http://127.0.0.1:${supplier.port}`, 40)).id
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop(true)
})

const surfaces = streamSurfaces('go on', 8_000)

type Ending = { error?: { code: string }; response?: { incomplete_details: { reason: string } } }

/** The stream's response, not read: node's client stops reading its socket once paused. */
function unreadStream(path: string, body: unknown): Promise<IncomingMessage> {
  const url = new URL(path, stack.url)
  const json = JSON.stringify({ ...(body as object), stream: true })
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
    })
    req.on('response', (response) => {
      response.pause()
      resolve(response)
    })
    req.on('error', reject)
    req.end(json)
  })
}

function readAll(response: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = ''
    response.setEncoding('utf8')
    response.on('data', (part: string) => {
      text += part
    })
    response.on('end', () => resolve(text))
    response.on('error', reject)
    response.resume()
  })
}

describe('a stream whose client takes nothing is ended at SVC_STREAM_MAX_MS', () => {
  for (const [surface, { path, body }] of Object.entries(surfaces)) {
    test(surface, async () => {
      const before = await balances(stack, buyer.accountId)
      const response = await unreadStream(path, body)
      expect(response.statusCode).toBe(200)
      // The client still reads nothing: the supplier is let go and the stream cleared all the same.
      await until(() => open === 0)
      await until(async () => (await balances(stack, buyer.accountId)).held === 0)
      expect(await stack.store.hget(stack.keys.account(buyer.accountId), 'inflight')).toBe('0')
      expect(await stack.store.hget(stack.keys.offer(offerId), 'inflight')).toBe('0')
      expect((await balances(stack, buyer.accountId)).confirmed).toBeLessThan(before.confirmed)
      // Read at last, the stream ends as a stream cut short does.
      const last = sseData(await readAll(response)).at(-1) as Ending
      expect(
        last.error?.code ?? last.response?.incomplete_details.reason,
        `the last frame: ${JSON.stringify(last).slice(0, 300)}`,
      ).toBe('stream_incomplete')
    }, 20_000)
  }
})
