// A stream that outlives its lease: the relay renews the lease while bytes flow, so the reaper
// never takes it and the clear is an ordinary one (not a late clear after a reap).
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, simOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount

// 35 tokens at 5 a second: about 7 s, past the 5 s lease (the shortest allowed), reaped every 100 ms.
beforeAll(async () => {
  stack = await startStack({
    sim: { outputTokens: 35, tokensPerSecond: 5 },
    env: { SVC_LEASE_SECONDS: '5', SVC_REAP_INTERVAL_MS: '100' },
  })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '1.000000')
})
afterAll(() => stack.stop())

test('two streams longer than the lease are renewed, never reaped, and cleared normally', async () => {
  const before = await balances(stack, buyer.accountId)
  const run = async () => {
    const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', stream: true, messages: [{ role: 'user', content: 'slowly' }] },
    })
    return sseData(await response.text())
  }
  const streams = await Promise.all([run(), run()])
  for (const frames of streams) {
    expect(frames.at(-1)).toBe('[DONE]')
    const cost = frames.at(-2) as { supportReference: string }
    const attempt = await stack.redis.hgetall(stack.keys.attempt(`${cost.supportReference}.1`))
    expect(attempt.state).toBe('cleared')
    // not a late clear (the field is only written for one)
    expect(attempt.lateClear).toBeUndefined()
  }
  const after = await balances(stack, buyer.accountId)
  expect(after.held).toBe(0)
  expect(after.spent).toBeGreaterThan(before.spent)
}, 30_000)
