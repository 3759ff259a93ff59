// balance.low from paid requests through the simulated supplier: written by the clear that takes
// the balance across the endpoint's threshold downward (once per crossing), delivered signed.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { formatMicros } from '../../src/money/units.ts'
import { verify } from '../../src/webhooks/signing.ts'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import type { TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { registerWebhook, startReceiver, startWebhookStack } from './helpers.ts'

let stack: TestStack
const receiver = startReceiver()
beforeAll(async () => {
  stack = await startWebhookStack()
  await simOffer(stack, 40)
})
afterAll(async () => {
  await stack.stop()
  await receiver.stop()
})

const chat = (apiKey: string) =>
  fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'svc/llama-3.3-70b',
      messages: [{ role: 'user', content: 'Say something.' }],
    }),
  })

test('the clear that takes the balance below a threshold writes balance.low once per crossing', async () => {
  const buyer = await fundedBuyer(stack, '10.000000')
  const first = await chat(buyer.apiKey)
  expect(first.status).toBe(200)
  await first.text()
  const afterFirst = (await balances(stack, buyer.accountId)).confirmed
  const cost = 10_000_000 - afterFirst
  expect(cost).toBeGreaterThan(0)

  // Crossed by the next request, not by the ones after it (already below).
  const threshold = afterFirst - Math.floor(cost / 2)
  const created = await registerWebhook(stack, buyer.apiKey, '/v1/agent', {
    url: receiver.url,
    events: ['balance.low', 'key.budget.80', 'key.budget.100'],
    balanceThresholdUsdc: formatMicros(threshold),
  })
  expect(created.status).toBe(201)
  const { secret } = (await created.json()) as { secret: string }
  for (let i = 0; i < 3; i++) {
    const response = await chat(buyer.apiKey)
    expect(response.status).toBe(200)
    await response.text()
  }
  const stream = stack.keys.webhookEvents(`acct:${buyer.accountId}`)
  await until(() => receiver.unique().length >= 1)
  await until(async () => ((await stack.store.xpending(stream, 'deliver')) as [number])[0] === 0)
  const events = receiver.unique().map((r) => {
    expect(verify(secret, r.id, r.timestamp, r.body, r.signature)).toBe(true)
    return JSON.parse(r.body) as { type: string; data: Record<string, unknown> }
  })
  expect(events).toEqual([
    expect.objectContaining({
      type: 'balance.low',
      data: { thresholdUsdc: formatMicros(threshold), balanceUsdc: formatMicros(afterFirst - cost) },
    }),
  ])
  // The key has no limit: no budget event, and nothing else in the stream.
  expect(await stack.store.xlen(stream)).toBe(1)
})
