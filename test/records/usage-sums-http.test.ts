// GET /v1/agent/usage through a real gateway, on sums kept beside the activity Stream: entries of
// past hours and days placed by their ids, a request served for real, and every window's answer
// equal to a scan of the whole Stream, read after read, as requests keep ending.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { utcDay } from '../../src/records/days.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../../src/records/refusals.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { append, DAY, endedEntry, idsAt, referenceUsage, seeded } from '../helpers/usage-streams.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40, { capacityDiem: '1000' })
})
afterAll(() => stack.stop())

const redisNow = async () => {
  const [seconds, micros] = await stack.store.time()
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
}

test('every window answers what a scan of the whole Stream does, as requests keep ending', async () => {
  const buyer = await fundedBuyer(stack)
  const stream = stack.keys.accountActivity(buyer.accountId)
  const now = await redisNow()
  const random = seeded(97)
  const times = Array.from({ length: 2_000 }, () => now - 40 * DAY + Math.floor(random() * 40 * DAY - 60_000))
  await append(stack.store, stream, idsAt(times.sort((a, b) => a - b)), () => [
    'e',
    endedEntry(random, buyer.accountId),
  ])

  for (let round = 0; round < 3; round++) {
    const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 },
    })
    expect(chat.status).toBe(200)
    await chat.arrayBuffer()
    for (const window of ['24h', '7d', '30d'] as const) {
      // Read again where UTC midnight passed between the answer and the reference's clock.
      for (;;) {
        const before = await redisNow()
        const usage = await (await keyFetch(stack, buyer.apiKey, `/v1/agent/usage?window=${window}`)).json()
        const after = await redisNow()
        if (utcDay(before) !== utcDay(after)) continue
        expect(usage).toEqual(
          await referenceUsage(stack.store, stream, window, after, DEFAULT_RECORD_RETENTION_MS),
        )
        break
      }
    }
  }
  expect(await stack.store.exists(stack.keys.accountUsage(buyer.accountId))).toBe(1)
})
