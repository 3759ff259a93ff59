// A supplier changing its offer while the offer's requests are in flight: each request clears at
// the ask it was admitted at (never above the buyer's max), its hold returns exactly once, and the
// offer earns exactly what its buyers were charged less the fee.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { keyFetch } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let supplier: TestSupplier

beforeAll(async () => {
  stack = await startStack({ env: { SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE: '1000' } })
  supplier = await signInSupplier(stack)
})
afterAll(() => stack.stop())

async function postOffer(askCents: number, capacityDiem = '10') {
  const response = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: `venice-${randomUUID()}`, askCents, capacityDiem },
  })
  expect(response.status).toBe(201)
  return ((await response.json()) as { id: string }).id
}

const offerPath = (id: string) => `/v1/supplier/offers/${id}`

type Usage = { prompt_tokens: number; completion_tokens: number }
type Change = { method: 'PATCH'; json: Record<string, unknown> } | { method: 'DELETE' }

const changes: [string, Change[]][] = [
  ['ask raised past the max', [{ method: 'PATCH', json: { askCents: 80 } }]],
  ['ask lowered', [{ method: 'PATCH', json: { askCents: 30 } }]],
  ['paused', [{ method: 'PATCH', json: { status: 'paused' } }]],
  ['deleted', [{ method: 'DELETE' }]],
  [
    'paused, repriced, resumed',
    [
      { method: 'PATCH', json: { status: 'paused' } },
      { method: 'PATCH', json: { askCents: 79 } },
      { method: 'PATCH', json: { status: 'active' } },
    ],
  ],
]

for (const [name, steps] of changes) {
  test(`${name} mid-request: cleared at the admitted ask, held once, earned once`, async () => {
    const buyer = await fundedBuyer(stack)
    expect(
      (
        await keyFetch(stack, buyer.apiKey, '/v1/agent/max-price', {
          method: 'PATCH',
          json: { maxPriceCents: 50 },
        })
      ).status,
    ).toBe(200)
    const id = await postOffer(40)
    stack.sim.settings.holdFirstToken = true
    const requests = Array.from({ length: 3 }, () =>
      keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
        method: 'POST',
        json: {
          model: 'llama-3.3-70b',
          stream: true,
          stream_options: { include_usage: true },
          max_tokens: 50,
          messages: [{ role: 'user', content: 'hello there' }],
        },
      }),
    )
    await until(async () => Number(await stack.store.hget(stack.keys.offer(id), 'inflight')) === 3)
    for (const step of steps) {
      const r = await keyFetch(stack, supplier.apiKey, offerPath(id), step)
      expect(r.status).toBe(200)
    }
    stack.sim.releaseFirstTokens()
    let charged = 0
    for (const response of await Promise.all(requests)) {
      expect(response.status).toBe(200)
      const frames = sseData(await response.text())
      const last = frames.findLast((f) => typeof f === 'object' && f.usage) as { usage: Usage }
      const usage = last.usage
      charged += expectedCost(usage, 40)
    }
    await until(async () => (await balances(stack, buyer.accountId)).held === 0)
    // Every request at the ask it was admitted at: 40, whatever the offer asks now.
    expect((await balances(stack, buyer.accountId)).spent).toBe(charged)
    const offer = await stack.store.hgetall(stack.keys.offer(id))
    expect({ held: offer.held, inflight: offer.inflight }).toEqual({ held: '0', inflight: '0' })
    const fee = Number(offer.fees ?? 0)
    expect(Number(offer.earned) + fee).toBe(charged)
    await keyFetch(stack, supplier.apiKey, offerPath(id), { method: 'DELETE' })
  })
}
