// SVC_RECORD_RETENTION_DAYS bounds what /v1/agent/activity lists: the account's Stream is trimmed
// with XADD MINID ~, which removes only whole Stream nodes (about a hundred entries), and only on
// one append in 16: an account with fewer entries, or one that went idle, keeps its attempts there
// forever. An attempt older than the retention (its record already expired, its support reference
// a 404) must not be listed.
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

test('an attempt ended before the retention is not listed, even where the Stream kept it', async () => {
  const buyer = await fundedBuyer(stack)
  // What lua/lib/attempts.lua end_attempt appended two days ago, on a retention of one day.
  const [seconds] = await stack.store.time()
  const twoDaysAgo = Number(seconds) * 1000 - 2 * 86_400_000
  const old = 'sr_aaaaaaaaaaaaaaaaaaaa'
  const entry = [
    `${old}.1`,
    buyer.accountId,
    'key-1',
    'completed',
    '1000',
    '40',
    '5',
    '5',
    'off_1',
    '',
    'llama-3.3-70b',
  ].join('\x1f')
  await stack.store.xadd(stack.keys.accountActivity(buyer.accountId), `${twoDaysAgo}-0`, 'e', entry)
  // A new request: its append may trim the Stream (MINID ~), which leaves a small one whole.
  const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 },
  })
  expect(chat.status).toBe(200)
  const fresh = chat.headers.get('x-svc-support-reference')!
  await chat.arrayBuffer()

  expect((await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${old}`)).status).toBe(404)
  const page = (await (await keyFetch(stack, buyer.apiKey, '/v1/agent/activity')).json()) as {
    data: { supportReference: string }[]
  }
  expect(page.data.map((d) => d.supportReference)).toEqual([fresh])
})
