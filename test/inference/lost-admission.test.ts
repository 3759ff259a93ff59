// A paid stream whose admission the store loses while the supplier is answering, as a failover to
// a Redis replica that the admit never reached loses it: the market's keys put back as they were
// before the request (test/helpers/saved-keys.ts) while the supplier holds its first token.
// The stream still ends with its cost, the record charges exactly that, the supplier earns it less
// the fee, and the audit finds nothing off. The openai SDK as the client.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { auditAll } from '../../src/cli/audit.ts'
import { parseMicros } from '../../src/money/units.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { balances, fundedBuyer, type SimOffer, simOffer } from '../helpers/buyers.ts'
import { saveKeys } from '../helpers/saved-keys.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyer: TestAccount
let offer: SimOffer

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  offer = await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '1.000000')
})
afterAll(() => stack.stop())

const lostTotal = async () => {
  const text = await (await adminFetch(stack, '/metrics')).text()
  return Number(text.match(/^svc_lost_admissions_total (\d+)/m)?.[1] ?? 0)
}

test('a stream whose admission the store lost mid-flight ends with its cost, charged once, audit clean', async () => {
  const lostBefore = await lostTotal()
  const before = await saveKeys(stack.store, stack.keys.prefix)
  stack.sim.settings.holdFirstToken = true
  const client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
  const stream = await client.chat.completions.create({
    model: 'llama-3.3-70b',
    messages: [{ role: 'user', content: 'hello' }],
    stream: true,
  })
  const frames: unknown[] = []
  const reading = (async () => {
    for await (const chunk of stream) frames.push(chunk)
  })()
  await until(async () => (await balances(stack, buyer.accountId)).held > 0)
  await before.restore()
  expect((await balances(stack, buyer.accountId)).held).toBe(0)
  stack.sim.releaseFirstTokens()
  await reading

  const cost = frames.at(-1) as { object: string; costUsdc: string; supportReference: string }
  expect(cost.object).toBe('svc.cost')
  const charged = parseMicros(cost.costUsdc)!
  expect(charged).toBeGreaterThan(0)
  const attempt = await attemptRecord(stack.store, stack.keys.attempt(`${cost.supportReference}.1`))
  expect(attempt).toMatchObject({ state: 'cleared', lateClear: 'lost', costUsdc: String(charged) })
  const after = await balances(stack, buyer.accountId)
  expect(after).toEqual({ confirmed: 1_000_000 - charged, held: 0, spent: charged })
  const row = await stack.store.hgetall(stack.keys.offer(offer.id))
  expect(Number(row.earned) + Number(row.fees ?? 0)).toBe(charged)
  expect(row).toMatchObject({ held: '0', inflight: '0' })
  // The buyer's record of the request says what the stream said.
  const record = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${cost.supportReference}`)
  expect(await record.json()).toMatchObject({ status: 'completed', costUsdc: cost.costUsdc })
  expect(await lostTotal()).toBe(lostBefore + 1)
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
})
