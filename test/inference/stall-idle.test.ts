// A stalled stream is given up on at the idle time even when keep-alives are further apart: the
// relay must not wait for the next keep-alive (15 s by default) to notice a 0.5 s idle limit.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simKey, simOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let upstreamKey: string

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 8 }, env: { SVC_STREAM_IDLE_MS: '500' } })
  upstreamKey = (await simOffer(stack, 40)).upstreamKey
  buyer = await fundedBuyer(stack)
})
afterAll(() => stack.stop())

test('idle limit shorter than the keep-alive: the stall ends the stream as stream_incomplete', async () => {
  await simKey(stack, upstreamKey, { fault: 'stall', times: 1 })
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', stream: true, messages: [{ role: 'user', content: 'hi' }] },
  })
  // A relay that checked the 0.5 s idle limit only at its 15 s keep-alive would have sent one
  // first: no keep-alive before the end is the check, not the time it took.
  const frames = sseData(await response.text())
  expect((frames.at(-1) as { error: { code: string } }).error.code).toBe('stream_incomplete')
  expect(frames.some((f) => f === ': keep-alive')).toBe(false)
  const held = await stack.store.hget(stack.keys.account(buyer.accountId), 'held')
  expect(held).toBe('0')
})
