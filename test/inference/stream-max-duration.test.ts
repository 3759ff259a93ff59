// A supplier whose stream never stalls (a token every 50 ms, for ever) is never idle, so only a
// bound on the whole stream ends it: past SVC_STREAM_MAX_MS it is cut and ends as a stalled stream
// does (billed on its estimate, stream_incomplete), its hold, slots and supplier call let go.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { streamSurfaces, type TricklingSupplier, tricklingSupplier } from '../helpers/trickling-supplier.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyer: TestAccount
let supplier: TricklingSupplier
let offerId: string

const chunk = (content: string) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-f',
    object: 'chat.completion.chunk',
    model: 'llama-3.3-70b',
    choices: [{ index: 0, delta: { content } }],
  })}\n\n`

beforeAll(async () => {
  supplier = tricklingSupplier(
    () => chunk('and'),
    () => chunk(' on'),
    50,
  )
  stack = await startStack({
    env: { SVC_STREAM_MAX_MS: '1500', SVC_STREAM_IDLE_MS: '1000', SVC_KEEPALIVE_MS: '100' },
  })
  offerId = (await postOffer(stack, supplier.url, 40)).id
  buyer = await fundedBuyer(stack, '1.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop()
})

const surfaces = streamSurfaces('go on', 4096)

type Ending = { error?: { code: string }; response?: { incomplete_details: { reason: string } } }

describe('a stream that flows for ever is cut at SVC_STREAM_MAX_MS', () => {
  for (const [surface, { path, body }] of Object.entries(surfaces)) {
    test(surface, async () => {
      const before = await balances(stack, buyer.accountId)
      const response = await keyFetch(stack, buyer.apiKey, path, {
        method: 'POST',
        json: { ...body, stream: true },
      })
      expect(response.status).toBe(200)
      // Never resolves (the test's time limit) while the supplier goes on.
      const text = await response.text()
      const last = sseData(text).at(-1) as Ending
      expect(last.error?.code ?? last.response?.incomplete_details.reason).toBe('stream_incomplete')
      await until(() => supplier.open() === 0)
      await until(async () => (await balances(stack, buyer.accountId)).held === 0)
      expect(await stack.store.hget(stack.keys.account(buyer.accountId), 'inflight')).toBe('0')
      expect(await stack.store.hget(stack.keys.offer(offerId), 'inflight')).toBe('0')
      // What was relayed is billed, on its estimate.
      expect((await balances(stack, buyer.accountId)).confirmed).toBeLessThan(before.confirmed)
    }, 15_000)
  }
})
