// A supplier that answers in broken HTTP, through the whole gateway: before any content reaches the
// buyer, every kind of break falls forward to the honest offer (never a 5xx of our own, nothing
// charged for the broken attempt, nothing held); a break after content ends the stream as
// stream_incomplete, billed on the estimate, the hold returned.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, simOffer, sseData } from '../helpers/buyers.ts'
import {
  type HostileAnswer,
  type HostileSupplier,
  hostileSupplier,
  httpHead,
} from '../helpers/hostile-supplier.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let hostile: HostileSupplier
let buyer: TestAccount
let hostileOfferId: string
let answer: () => HostileAnswer

beforeAll(async () => {
  hostile = hostileSupplier(() => answer())
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0', SVC_FIRST_BYTE_TIMEOUT_MS: '3000' } })
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: { upstreamBaseUrl: hostile.url, upstreamApiKey: 'broken-http', askCents: 33, capacityDiem: '50' },
  })
  expect(offer.status).toBe(201)
  hostileOfferId = ((await offer.json()) as { id: string }).id
  await simOffer(stack, 48)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  hostile.stop()
})

const chunk = (content: string) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] })}\n\n`
const COMPLETION = JSON.stringify({
  id: 'c',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi there' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
})
const SSE = { 'content-type': 'text/event-stream' }
const JSON_TYPE = { 'content-type': 'application/json' }

/** Each break: its name and the answer, for a buffered call and for a stream. */
const BROKEN: [string, (stream: boolean) => HostileAnswer][] = [
  ['a status line that is no HTTP', () => ({ head: 'HELLO THERE', body: '', close: true })],
  [
    'a head larger than any bound',
    (stream) => ({ head: `${httpHead(200, stream ? SSE : JSON_TYPE)}\r\nx-pad: ${'a'.repeat(80_000)}` }),
  ],
  [
    'a bad chunk size',
    (stream) => ({
      head: httpHead(200, { ...(stream ? SSE : JSON_TYPE), 'transfer-encoding': 'chunked' }),
      body: 'zz\r\nwhatever\r\n',
    }),
  ],
  [
    'a chunk longer than its size',
    (stream) => {
      const data = stream ? chunk('hello') : COMPLETION
      return {
        head: httpHead(200, { ...(stream ? SSE : JSON_TYPE), 'transfer-encoding': 'chunked' }),
        body: `${(data.length - 10).toString(16)}\r\n${data}\r\n0\r\n\r\n`,
      }
    },
  ],
  [
    'a Content-Length longer than the body, then a close',
    (stream) => {
      const data = stream ? chunk('hel') : COMPLETION
      return {
        head: httpHead(200, { ...(stream ? SSE : JSON_TYPE), 'content-length': data.length + 100 }),
        body: stream ? data.slice(0, -5) : data,
        close: true,
      }
    },
  ],
  [
    'a Content-Length shorter than the body',
    (stream) => {
      const data = stream ? chunk('hello') : COMPLETION
      return { head: httpHead(200, { ...(stream ? SSE : JSON_TYPE), 'content-length': 20 }), body: data }
    },
  ],
  ['an empty head, then a close', () => ({ head: '', body: '', close: true })],
]

async function attempts(reference: string) {
  const response = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
  const view = (await response.json()) as { attempts: { offerId: string | null; errorCode: string | null }[] }
  return view.attempts.map((a) => [a.offerId === hostileOfferId, a.errorCode === null])
}

describe('broken before any content: served by the honest offer, charged only there', () => {
  for (const stream of [false, true]) {
    for (const [name, broken] of BROKEN) {
      test(`${stream ? 'streamed' : 'buffered'}: ${name}`, async () => {
        answer = () => broken(stream)
        const before = await balances(stack, buyer.accountId)
        const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
          method: 'POST',
          json: {
            model: 'llama-3.3-70b',
            messages: [{ role: 'user', content: 'hello' }],
            max_tokens: 8,
            stream,
          },
        })
        expect(response.status).toBe(200)
        let usage: { prompt_tokens: number; completion_tokens: number }
        if (stream) {
          const frames = sseData(await response.text())
          expect(frames.at(-1)).toBe('[DONE]')
          const cost = frames.at(-2) as { clearingPriceCents: number }
          expect(cost.clearingPriceCents).toBe(48)
          usage = (frames.find((f) => typeof f === 'object' && f.usage) as { usage: typeof usage }).usage
        } else {
          expect(response.headers.get('x-svc-clearing-price-cents')).toBe('48')
          usage = ((await response.json()) as { usage: typeof usage }).usage
        }
        const after = await balances(stack, buyer.accountId)
        expect(before.confirmed - after.confirmed).toBe(expectedCost(usage, 48))
        expect(after.held).toBe(0)
        expect(await attempts(response.headers.get('x-svc-support-reference')!)).toEqual([
          [true, false],
          [false, true],
        ])
      })
    }
  }
})

test('a stream whose connection closes mid-frame after content: stream_incomplete, billed on estimate', async () => {
  answer = () => ({
    head: httpHead(200, { ...SSE, 'transfer-encoding': 'chunked' }),
    body: `${chunk('hello').length.toString(16)}\r\n${chunk('hello')}\r\n20\r\ndata: {"id":"c","obj`,
    close: true,
  })
  const before = await balances(stack, buyer.accountId)
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: {
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
      stream: true,
    },
  })
  expect(response.status).toBe(200)
  const frames = sseData(await response.text())
  expect((frames.at(-1) as { error: { code: string } }).error.code).toBe('stream_incomplete')
  const cost = frames.at(-2) as { object: string; costUsdc: string; clearingPriceCents: number }
  expect(cost).toMatchObject({ object: 'svc.cost', clearingPriceCents: 33 })
  const after = await balances(stack, buyer.accountId)
  expect(((before.confirmed - after.confirmed) / 1e6).toFixed(6)).toBe(cost.costUsdc)
  expect(after.held).toBe(0)
})
