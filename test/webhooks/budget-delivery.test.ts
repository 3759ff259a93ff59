// key.budget.80 and key.budget.100 end to end: the real gateway, the openai SDK spending through a
// limited key (images, each charged exactly its hold) until its budget refuses, and a receiver of the test's own on loopback (allowed by
// the test-only setting). Each event arrives once after dedup by id, signed, with what the key had
// spent; the refused requests deliver nothing; a daily budget's next period delivers both again.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { formatMicros, parseMicros } from '../../src/money/units.ts'
import { verify } from '../../src/webhooks/signing.ts'
import { mintKey } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
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

/** One paid image through `client`: what it was charged, micro-USDC (exactly its hold). */
async function image(client: OpenAI): Promise<number> {
  const { response } = await client.images.generate({ model: 'flux-dev', prompt: 'x' }).withResponse()
  return parseMicros(response.headers.get('x-svc-cost-usdc') ?? '') ?? 0
}

/** Paid images through `client` until the key's budget refuses one (403 key_limit_exceeded). */
async function spendUntilRefused(client: OpenAI): Promise<number> {
  for (let calls = 0; calls < 20; calls++) {
    try {
      await image(client)
    } catch (error) {
      const refusal = error as InstanceType<typeof OpenAI.APIError>
      expect(refusal.status).toBe(403)
      expect((refusal.error as { code?: string }).code).toBe('key_limit_exceeded')
      return calls
    }
  }
  throw new Error('the budget never refused a request')
}

interface BudgetEvent {
  id: string
  type: string
  data: { keyId: string; limitUsdc: string; spentUsdc: string; percent: number }
}

/** The events delivered so far, each once by id, after checking every delivery's signature. */
function delivered(secret: string, to = receiver): BudgetEvent[] {
  for (const r of to.received) expect(verify(secret, r.id, r.timestamp, r.body, r.signature)).toBe(true)
  return to.unique().map((r) => {
    const body = JSON.parse(r.body) as BudgetEvent
    expect(body.id).toBe(r.id)
    return body
  })
}

/** An image's price, five to the limit: the fourth reaches 80% of it, the fifth 100%. */
function expectCrossed(event: BudgetEvent, keyId: string, price: number, pct: 80 | 100) {
  const spent = pct === 80 ? 4 * price : 5 * price
  expect(event).toMatchObject({
    type: `key.budget.${pct}`,
    data: { keyId, limitUsdc: formatMicros(5 * price), spentUsdc: formatMicros(spent), percent: pct },
  })
}

test('a daily budget: 80% and 100% arrive once each per period, signed; refusals deliver nothing', async () => {
  const buyer = await fundedBuyer(stack)
  // The account's own key has no limit: what an image costs, and no budget event for it.
  const price = await image(new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 }))
  expect(price).toBeGreaterThan(0)
  const key = await mintKey(stack, buyer.apiKey, {
    name: 'agent',
    limitUsdc: formatMicros(5 * price),
    limitReset: 'daily',
  })
  const created = await registerWebhook(stack, buyer.apiKey, '/v1/agent', {
    url: receiver.url,
    events: ['key.budget.80', 'key.budget.100'],
  })
  expect(created.status).toBe(201)
  const { secret } = (await created.json()) as { secret: string }
  const client = new OpenAI({ apiKey: key.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
  const stream = stack.keys.webhookEvents(`acct:${buyer.accountId}`)
  const settled = async () => ((await stack.store.xpending(stream, 'deliver')) as [number])[0] === 0

  expect(await spendUntilRefused(client)).toBe(5)
  // A second refusal: still nothing more.
  expect(await spendUntilRefused(client)).toBe(0)
  await until(async () => receiver.unique().length >= 2 && (await settled()))
  const first = delivered(secret)
  expect(first).toHaveLength(2)
  expectCrossed(first[0]!, key.id, price, 80)
  expectCrossed(first[1]!, key.id, price, 100)
  expect(await stack.store.xlen(stream)).toBe(2)

  // The period moves on (what was spent counts in the day before): both marks are reached again.
  const account = stack.keys.account(buyer.accountId)
  const start = Number(await stack.store.hget(account, `pstart:${key.id}`))
  await stack.store.hset(account, `pstart:${key.id}`, start - 86_400_000)
  expect(await spendUntilRefused(client)).toBe(5)
  await until(async () => receiver.unique().length >= 4 && (await settled()))
  const all = delivered(secret)
  expect(all).toHaveLength(4)
  expectCrossed(all[2]!, key.id, price, 80)
  expectCrossed(all[3]!, key.id, price, 100)
  expect(await stack.store.xlen(stream)).toBe(4)
})

test('a lifetime budget: 80% and 100% arrive once each, and never again', async () => {
  const own = startReceiver()
  try {
    const buyer = await fundedBuyer(stack)
    const price = await image(new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 }))
    const key = await mintKey(stack, buyer.apiKey, { name: 'agent', limitUsdc: formatMicros(5 * price) })
    const created = await registerWebhook(stack, buyer.apiKey, '/v1/agent', {
      url: own.url,
      events: ['key.budget.80', 'key.budget.100'],
    })
    const { secret } = (await created.json()) as { secret: string }
    const client = new OpenAI({ apiKey: key.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
    expect(await spendUntilRefused(client)).toBe(5)
    expect(await spendUntilRefused(client)).toBe(0)
    const stream = stack.keys.webhookEvents(`acct:${buyer.accountId}`)
    await until(
      async () =>
        own.unique().length >= 2 && ((await stack.store.xpending(stream, 'deliver')) as [number])[0] === 0,
    )
    const events = delivered(secret, own)
    expect(events).toHaveLength(2)
    expectCrossed(events[0]!, key.id, price, 80)
    expectCrossed(events[1]!, key.id, price, 100)
    expect(await stack.store.xlen(stream)).toBe(2)
  } finally {
    await own.stop()
  }
})
