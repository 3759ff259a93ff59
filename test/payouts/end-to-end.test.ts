// End to end on a real local chain: buyers' traffic clears on a self-served offer, then the
// supplier pays out exactly what it earned and the chain shows exactly that transfer; `svc-gateway
// audit --chain` (the real CLI) finds it all sound, and names a payout record tampered with.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import type { Address } from 'viem'
import { parseMicros } from '../../src/money/units.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { runCli } from '../helpers/cli.ts'
import {
  type PayoutBody,
  payoutEnv,
  payoutWalletOn,
  postPayout,
  supplierMe,
  transfersFrom,
  waitForPayout,
} from '../helpers/payouts.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'

let chain: TestChain
let stack: TestStack
let payoutAddress: Address

beforeAll(async () => {
  chain = await startChain()
  const wallet = await payoutWalletOn(chain)
  payoutAddress = wallet.address
  stack = await startStack({
    env: { ...payoutEnv(chain, wallet.key), SVC_PAYOUT_MIN_USDC: '0.000001' },
    sim: { outputTokens: 200 },
  })
})
afterAll(async () => {
  await stack.stop()
  await chain.stop()
})

test('buyer traffic on a self-served offer, then the supplier pays out exactly its earnings', async () => {
  const supplier = await signInSupplier(stack)
  const posted = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: `venice-${randomUUID()}`, askCents: 45, capacityDiem: '100' },
  })
  expect(posted.status).toBe(201)
  const buyer = await fundedBuyer(stack, '50')
  const responses = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
        method: 'POST',
        json: {
          model: 'llama-3.3-70b',
          messages: [{ role: 'user', content: `request ${i}` }],
          max_tokens: 400,
        },
      }),
    ),
  )
  expect(responses.map((r) => r.status)).toEqual(Array(20).fill(200))
  const charged = responses.reduce((sum, r) => sum + parseMicros(r.headers.get('x-svc-cost-usdc')!)!, 0)
  expect(charged).toBeGreaterThan(0)
  const me = await supplierMe(stack, supplier.apiKey)
  expect(parseMicros(me.earnedUsdc!)).toBe(charged)
  expect(me.payableUsdc).toBe(me.earnedUsdc)

  const asked = await postPayout(stack, supplier.apiKey, me.payableUsdc!, 'all-of-it')
  expect(asked.status).toBe(201)
  const id = ((await asked.json()) as PayoutBody).id
  const done = await waitForPayout(stack, chain, supplier.apiKey, id, ['confirmed', 'failed'])
  expect(done.state).toBe('confirmed')
  expect(await transfersFrom(chain, payoutAddress)).toEqual([
    { to: supplier.wallet as Address, value: BigInt(charged), tx: done.txHash as `0x${string}` },
  ])
  expect(await chain.balanceOf(supplier.wallet as Address)).toBe(BigInt(charged))
  expect(await supplierMe(stack, supplier.apiKey)).toMatchObject({
    earnedUsdc: me.earnedUsdc,
    paidOutUsdc: me.earnedUsdc,
    payoutPendingUsdc: '0.000000',
    payableUsdc: '0.000000',
  })
})

test('audit --chain reads every confirmed payout on chain, and names a tampered one', async () => {
  const env = { REDIS_URL: stack.config.redisUrl, SVC_REDIS_PREFIX: stack.keys.prefix, ...chain.env() }
  const clean = await runCli(['audit', '--chain'], env)
  expect(clean.stdout).toContain('audit: 1 confirmed payout(s) read on chain')
  expect(clean.stdout).toContain('every invariant holds')
  expect(clean.code).toBe(0)

  const [id] = await stack.store.zrange(stack.keys.payoutsOpen, 0, -1)
  expect(id).toBeUndefined()
  const supplierId = (await stack.store.smembers(stack.keys.suppliers))[0]!
  const payoutId = (await stack.store.zrange(stack.keys.supplierPayouts(supplierId), 0, -1))[0]!
  // a record that says more was paid than the chain shows: Redis alone still adds up
  await stack.store.hincrby(stack.keys.payout(payoutId), 'amount', -1)
  await stack.store.hincrby(stack.keys.supplier(supplierId), 'paidOut', -1)
  const redisOnly = await runCli(['audit'], env)
  expect(redisOnly.code).toBe(0)
  const tampered = await runCli(['audit', '--chain'], env)
  expect(tampered.code).toBe(1)
  expect(tampered.stdout).toContain(`audit: payout ${payoutId}: its transaction 0x`)
  expect(tampered.stdout).toContain('holds no transfer of')
  // pending that no open payout accounts for
  await stack.store.hincrby(stack.keys.supplier(supplierId), 'pending', 7)
  const pending = await runCli(['audit'], env)
  expect(pending.code).toBe(1)
  expect(pending.stdout).toContain(`audit: supplier ${supplierId}: pending 7 != its open payouts' 0`)
})
