// The signup fuse counts settlement calls, not requests: only a request that owns a fresh,
// verified authorization spends a slot. Copies of one signed authorization are refused at the
// claim, before any chain or facilitator call, so they cannot use up the minute for everyone.
// Settled through x402's reference facilitator, whose call counts show what reached it.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { startFacilitator, type TestFacilitator } from '../helpers/facilitator.ts'
import { keysUnder, type TestStack } from '../helpers/stack.ts'
import { challenge, pay, post, xPayment } from '../helpers/x402.ts'

const FUSE = 3
const COPIES = 8
// The fuse counts per clock minute: its clock stands still mid-minute, so no test straddles two.
const FUSE_NOW = Math.floor(Date.now() / 60_000) * 60_000 + 30_000

let chain: TestChain
let facilitator: TestFacilitator
let stack: TestStack
let chainStack: ChainStack<undefined, TestFacilitator>
beforeAll(async () => {
  chainStack = await startChainStack({
    confirmations: 1,
    facilitator: startFacilitator,
    env: {
      SVC_X402_SIGNUP_FUSE_PER_MINUTE: String(FUSE),
      // No watcher pass during the test: nothing but the requests touches the claims.
      SVC_X402_WATCH_INTERVAL_MS: '600000',
    },
    tune: (config) => {
      config.funding!.fuseClock = () => FUSE_NOW
    },
  })
  ;({ chain, stack, facilitator } = chainStack)
}, 30_000)
afterAll(() => chainStack.stop())

const signupUrl = () => `${stack.url}/v1/x402/signup`
const body = { amountUsdc: '2.000000' }

/** Slots taken, over every minute's counter (a test may straddle a minute). */
async function fuseCount(): Promise<number> {
  const keys = await keysUnder(stack.store, stack.keys.signupFuse(0).replace(/0$/, ''))
  const counts = keys.length ? await stack.store.mget(keys) : []
  return counts.reduce((sum, count) => sum + Number(count), 0)
}

test(`one authorization sent ${COPIES} times at once (fuse ${FUSE}/min) settles once and takes one slot`, async () => {
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(payer, await challenge(signupUrl(), body))
  const responses = await Promise.all(
    Array.from({ length: COPIES }, () => post(signupUrl(), body, { 'x-payment': header })),
  )
  const statuses = responses.map((r) => r.status).sort()
  expect(statuses).toEqual([201, ...Array(COPIES - 1).fill(409)])
  for (const response of responses.filter((r) => r.status === 409)) {
    expect(['payment_in_flight', 'payment_already_credited']).toContain(
      (response.body.error as { code: string }).code,
    )
  }
  expect(await fuseCount()).toBe(1)
  // The copies never reached the facilitator: refused at the claim.
  expect(facilitator.calls).toEqual({ verify: 1, settle: 1 })
  expect(await chain.balanceOf(payer.address)).toBe(8_000_000n)

  // Another payer still signs up.
  const other = await chain.newPayer(10_000_000n)
  const { response } = await pay(signupUrl(), body, other)
  expect(response.status).toBe(201)
  expect(await fuseCount()).toBe(2)
})

test('a payment that fails verification takes no slot; past the fuse the claim is let go', async () => {
  const before = await fuseCount()
  const poor = await chain.newPayer(1_000_000n)
  const refused = await post(signupUrl(), body, {
    'x-payment': await xPayment(poor, await challenge(signupUrl(), body)),
  })
  expect(refused.status).toBe(402)
  expect(String(refused.body.error)).toContain('payment verification failed')
  expect(await fuseCount()).toBe(before)

  // Fill the minute, then one more: 429 with Retry-After, and its authorization is not held.
  const minute = Math.floor(FUSE_NOW / 60_000)
  const taken = Number((await stack.store.get(stack.keys.signupFuse(minute))) ?? 0)
  for (let i = taken; i < FUSE; i++) {
    const { response } = await pay(signupUrl(), body, await chain.newPayer(10_000_000n))
    expect(response.status).toBe(201)
  }
  const late = await chain.newPayer(10_000_000n)
  const { response } = await pay(signupUrl(), body, late)
  expect(response.status).toBe(429)
  expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0)
  expect(response.headers.get('retry-after')).toBe('30') // from the fuse's clock, mid-minute
  expect(await chain.balanceOf(late.address)).toBe(10_000_000n)
  expect(await stack.store.zcard(stack.keys.paymentsInFlight)).toBe(0)
})
