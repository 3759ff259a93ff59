// Fall-forward against a supplier of our own: a buyer that leaves while the supplier's first byte is
// awaited is not the supplier's failure. Cooled down for it, an honest offer left the ladder for the
// cooldown, and any buyer could take every cheap offer off it, one aborted stream each, for free.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import {
  type HostileAnswer,
  type HostileCall,
  type HostileSupplier,
  hostileSupplier,
  httpHead,
  sseAnswer,
} from '../helpers/hostile-supplier.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let hostile: HostileSupplier
let buyer: TestAccount
let hostileOfferId: string
let answer: (call: HostileCall) => HostileAnswer

beforeAll(async () => {
  hostile = hostileSupplier((call) => answer(call))
  // A long cooldown: an offer cooled by mistake stays out of every later request of the test.
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '600000' } })
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: { upstreamBaseUrl: hostile.url, upstreamApiKey: 'hostile-key', askCents: 33, capacityDiem: '50' },
  })
  expect(offer.status).toBe(201)
  hostileOfferId = ((await offer.json()) as { id: string }).id
  await simOffer(stack, 48) // the honest backup
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  hostile.stop()
})
beforeEach(async () => {
  hostile.calls.length = 0
  // Each test starts with the offer on the ladder, whatever the one before did to it.
  await stack.store.hset(stack.keys.offer(hostileOfferId), 'cooldownUntil', '0')
})

const chunk = (content: string) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-h',
    object: 'chat.completion.chunk',
    model: 'llama-3.3-70b',
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
  })}`
const usage = `data: ${JSON.stringify({
  id: 'chatcmpl-h',
  object: 'chat.completion.chunk',
  choices: [],
  usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
})}`
const honestStream = () => sseAnswer([chunk('hi'), chunk(' there'), usage, 'data: [DONE]'])

const chat = (init: { signal?: AbortSignal } = {}) =>
  keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: {
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
      stream: true,
    },
    ...init,
  })

async function cooldownUntil(): Promise<number> {
  return Number(await stack.store.hget(stack.keys.offer(hostileOfferId), 'cooldownUntil'))
}

async function attemptCodes(reference: string) {
  const response = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
  expect(response.status).toBe(200)
  const view = (await response.json()) as { attempts: { offerId: string | null; errorCode: string | null }[] }
  return view.attempts.map((a) => [a.offerId === hostileOfferId, a.errorCode])
}

describe('a buyer that leaves is not a supplier that failed', () => {
  // The head alone (the first read still waited on), or half a frame (the first frame waited on).
  test.each([
    ['no byte of the body', ''],
    ['half a frame', 'data: {"id":"chatcmpl-h"'],
  ])('closed with %s come: the offer is not cooled down, and serves the next request', async (_, body) => {
    let open!: () => void
    const gate = new Promise<void>((resolve) => {
      open = resolve
    })
    answer = () => ({
      head: httpHead(200, { 'content-type': 'text/event-stream', connection: 'close' }),
      body,
      gate,
      close: true,
    })
    const leaving = new AbortController()
    const pending = chat({ signal: leaving.signal }).catch(() => null)
    await until(() => hostile.calls.length === 1 && hostile.calls[0]!.sent > 0)
    leaving.abort()
    await pending
    // The attempt is released (nothing held), with no charge.
    await until(async () => (await balances(stack, buyer.accountId)).held === 0)
    open()
    expect(await cooldownUntil()).toBeLessThanOrEqual(Date.now())

    answer = honestStream
    const response = await chat()
    expect(response.status).toBe(200)
    await response.text()
    // Served by the cheaper offer the buyer's leaving did not take off the ladder.
    expect(await attemptCodes(response.headers.get('x-svc-support-reference')!)).toEqual([[true, null]])
  })
})
