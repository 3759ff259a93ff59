// GET /v1/agent/usage must agree with GET /v1/agent/activity: both read the account's ended-attempt
// Stream, and an attempt ended before the record retention (its record expired, its support
// reference a 404) is not listed by activity. The Stream is trimmed with MINID ~ (whole nodes, one
// append in 16), so such an entry may still be there: usage must not count it either, or its
// totals would disagree with the sum of the activity the account can see.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { keyFetch } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 }, env: { SVC_RECORD_RETENTION_DAYS: '1' } })
  await simOffer(stack, 40, { capacityDiem: '1000' })
})
afterAll(() => stack.stop())

test('usage counts only what activity lists: nothing ended before the record retention', async () => {
  const buyer = await fundedBuyer(stack)
  // What lua/lib/attempts.lua end_attempt appended two days ago, on a retention of one day.
  const [seconds] = await stack.store.time()
  const twoDaysAgo = Number(seconds) * 1000 - 2 * 86_400_000
  const entry = [
    'sr_aaaaaaaaaaaaaaaaaaaa.1',
    buyer.accountId,
    'key-1',
    'completed',
    '1000000',
    '40',
    '5',
    '5',
    'off_1',
    '',
    'llama-3.3-70b',
  ].join('\x1f')
  await stack.store.xadd(stack.keys.accountActivity(buyer.accountId), `${twoDaysAgo}-0`, 'e', entry)
  const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 },
  })
  expect(chat.status).toBe(200)
  await chat.arrayBuffer()

  const activity = (await (await keyFetch(stack, buyer.apiKey, '/v1/agent/activity')).json()) as {
    data: { status: string; costUsdc: string }[]
  }
  const listed = activity.data.filter((d) => d.status === 'completed')
  const listedMicros = listed.reduce((sum, d) => sum + Math.round(Number(d.costUsdc) * 1e6), 0)
  expect(listed).toHaveLength(1)

  const usage = (await (await keyFetch(stack, buyer.apiKey, '/v1/agent/usage?window=7d')).json()) as {
    costUsdc: string
    requests: number
  }
  expect({ requests: usage.requests, micros: Math.round(Number(usage.costUsdc) * 1e6) }).toEqual({
    requests: 1,
    micros: listedMicros,
  })
})
