// Money moved, then the credit write failed: the buyer gets 409 `reconciling: false` with the
// transaction (never `accepts`), the in-flight entry stays, and the reconciler credits it once
// Redis takes writes again. The failure is Redis's own: its own redis-server here (so no other
// test feels it), made to refuse writes (maxmemory, noeviction) while the transaction waits in
// anvil's mempool, after the hash was recorded and before the receipt comes back.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type LocalRedis, startLocalRedis } from '../../src/redis/local-server.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore } from '../../src/redis/store.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, pay, post, waitFor, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let local: LocalRedis
let store: Store
let stack: TestStack
let chainStack: ChainStack
beforeAll(async () => {
  local = await startLocalRedis(['--maxmemory-policy', 'noeviction'])
  store = createStore(local.url, { name: 'svc-test' })
  chainStack = await startChainStack({
    confirmations: 1,
    env: { REDIS_URL: local.url, SVC_X402_RECEIPT_TIMEOUT_MS: '4000', SVC_X402_WATCH_INTERVAL_MS: '50' },
  })
  ;({ chain, stack } = chainStack)
}, 30_000)
afterAll(async () => {
  await chainStack?.stop()
  store?.close()
  await local?.stop()
})

test('credit write fails after settlement -> 409 reconciling: false with the transaction -> credited later, once', async () => {
  const keys = stack.keys
  const payer = await chain.newPayer(50_000_000n)
  const { response: signup } = await pay(`${stack.url}/v1/x402/signup`, { amountUsdc: '2.000000' }, payer)
  expect(signup.status).toBe(201)
  const accountId = signup.body.accountId as string
  const bearer = { authorization: `Bearer ${signup.body.apiKey}` }
  const url = `${stack.url}/v1/x402/refill`
  const header = await xPayment(payer, await challenge(url, { amountUsdc: '9.000000' }, bearer))
  const payToBefore = await chain.balanceOf(chain.payTo)

  await chain.testClient.setAutomine(false)
  const answer = post(url, { amountUsdc: '9.000000' }, { ...bearer, 'x-payment': header })
  // The hash is recorded before broadcast, then the transfer waits in the mempool for a block.
  const inFlight = await waitFor(
    async () => {
      const [id] = await store.zrange(keys.paymentsInFlight, 0, -1)
      return id ? await store.hgetall(keys.authorization(id)) : {}
    },
    (record) => record.state === 'sent',
    20_000,
  )
  expect(inFlight.state).toBe('sent')
  const transaction = inFlight.tx as `0x${string}`
  const broadcast = await waitFor(
    () =>
      chain.publicClient.getTransaction({ hash: transaction }).then(
        () => true,
        () => false,
      ),
    (known) => known,
  )
  expect(broadcast).toBe(true)
  await store.config('SET', 'maxmemory', '1')
  try {
    await chain.testClient.mine({ blocks: 1 })
    const response = await answer
    expect(response.status).toBe(409)
    expect(response.body.accepts).toBeUndefined()
    expect(response.body.error).toMatchObject({
      code: 'credit_failed',
      reconciling: false,
      transaction: inFlight.tx,
    })
  } finally {
    await store.config('SET', 'maxmemory', '0')
    await chain.testClient.setAutomine(true)
  }
  // The money moved; the account was not credited; the entry is left for the reconciler.
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 9_000_000n)
  expect(await store.hget(keys.account(accountId), 'funded')).toBe('2000000')
  expect(await store.zcard(keys.paymentsInFlight)).toBe(1)

  // After SVC_X402_RECEIPT_TIMEOUT_MS the reconciler finds it on chain and credits it.
  const funded = await waitFor(
    () => store.hget(keys.account(accountId), 'funded'),
    (value) => value === '11000000',
    20_000,
  )
  expect(funded).toBe('11000000')
  expect(await store.zcard(keys.paymentsInFlight)).toBe(0)

  const replay = await post(url, { amountUsdc: '9.000000' }, { ...bearer, 'x-payment': header })
  expect(replay.status).toBe(409)
  expect(replay.body.error).toMatchObject({ code: 'payment_already_credited', transaction: inFlight.tx })
  expect(await store.hget(keys.account(accountId), 'funded')).toBe('11000000')
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 9_000_000n)
}, 30_000)
