// A v2 payment whose payload carries a permit2Authorization beside the EIP-3009 authorization:
// user input, so a 4xx in the contract's shape and nothing left in Redis, never a 5xx. What is
// verified must be what is settled (the EIP-3009 authorization), not another scheme's payload.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { challenge, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
beforeAll(async () => {
  chain = await startChain()
  stack = await startStack({ env: { ...chain.env(2), SVC_X402_WATCH_INTERVAL_MS: '600000' } })
}, 30_000)
afterAll(async () => {
  await stack.stop()
  await chain.stop()
})

test('a v2 payload with a stray permit2Authorization is a 4xx; nothing changes', async () => {
  const payer = await chain.newPayer(10_000_000n)
  const url = `${stack.url}/v1/x402/signup`
  const requirements = await challenge(url, { amountUsdc: '5.000000' })
  const v1 = JSON.parse(Buffer.from(await xPayment(payer, requirements), 'base64').toString())
  const accepted = {
    scheme: 'exact',
    network: 'eip155:84532',
    asset: requirements.asset,
    payTo: requirements.payTo,
    amount: requirements.maxAmountRequired,
    maxTimeoutSeconds: requirements.maxTimeoutSeconds,
    extra: requirements.extra,
  }
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  for (const permit2Authorization of [null, {}, { permitted: {} }]) {
    const header = Buffer.from(
      JSON.stringify({ x402Version: 2, accepted, payload: { ...v1.payload, permit2Authorization } }),
    ).toString('base64')
    const response = await post(url, { amountUsdc: '5.000000' }, { 'payment-signature': header })
    expect(response.status).toBeGreaterThanOrEqual(400)
    expect(response.status).toBeLessThan(500)
  }
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  expect(await chain.balanceOf(payer.address)).toBe(10_000_000n)

  // The same authorization, sent as plain EIP-3009, still pays.
  const clean = Buffer.from(JSON.stringify({ x402Version: 2, accepted, payload: v1.payload })).toString(
    'base64',
  )
  const paid = await post(url, { amountUsdc: '5.000000' }, { 'payment-signature': clean })
  expect(paid.status).toBe(201)
})
