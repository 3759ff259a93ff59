// Supplier calls that outlive their lease: every in-flight call's lease is renewed from admission,
// so the reaper never takes it and the clear is an ordinary one (not a late clear after a reap).
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { balances, fundedBuyer, simKey, simOffer, sseData } from '../helpers/buyers.ts'
import { lockstep } from '../helpers/lockstep.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount

// 30 tokens at 20 a second: 1.5 s, past a 600 ms lease reaped every 50 ms (a slow image: 1.5 s too).
// Each round renews, then reaps: however late a round runs, a renewal is never the one left behind.
const rounds = lockstep(50)
beforeAll(async () => {
  stack = await startStack({
    sim: { outputTokens: 30, tokensPerSecond: 20, slowFirstByteMs: 1_500 },
    tune: (config) => {
      config.market.leaseMs = 600
      config.market.every = rounds.every
    },
  })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '1.000000')
})
afterAll(async () => {
  await stack.stop()
  rounds.stop()
})

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
    const attempt = await attemptRecord(stack.store, stack.keys.attempt(`${cost.supportReference}.1`))
    expect(attempt.state).toBe('cleared')
    // not a late clear (the field is only written for one)
    expect(attempt.lateClear).toBeUndefined()
  }
  const after = await balances(stack, buyer.accountId)
  expect(after.held).toBe(0)
  expect(after.spent).toBeGreaterThan(before.spent)
}, 30_000)

test('an image call slower than the lease is renewed, never reaped, and cleared normally', async () => {
  const slow = await simOffer(stack, 35)
  await simKey(stack, slow.upstreamKey, { fault: 'slow_first_byte' })
  const response = await keyFetch(stack, buyer.apiKey, '/v1/images/generations', {
    method: 'POST',
    json: { model: 'flux-dev', prompt: 'a slow cat' },
  })
  expect(response.status).toBe(200)
  const attempt = await attemptRecord(
    stack.store,
    stack.keys.attempt(`${response.headers.get('x-svc-support-reference')}.1`),
  )
  expect(attempt).toMatchObject({ state: 'cleared', offerId: slow.id })
  expect(attempt.lateClear).toBeUndefined()
  expect((await balances(stack, buyer.accountId)).held).toBe(0)
}, 30_000)
