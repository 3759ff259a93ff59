// A relayer transaction dropped from the pool (never mined) leaves its nonce empty. Every later
// send takes a nonce above it (the key's floor, refreshed by each send) and waits behind the gap,
// so under steady traffic no payment would settle again. The relayer broadcasts the dropped
// transaction's own signed bytes again: the gap fills, the later payments are mined, and each
// authorization, the dropped one's included, is credited once. Real anvil, real Redis, real HTTP.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Hex, PrivateKeyAccount } from 'viem'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import type { TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { fundedOf, pay, sentClaim } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let chainStack: ChainStack

beforeAll(async () => {
  // Short receipt waits: a send behind the gap is answered 409 reconciling, and the stack's own
  // reconciler credits whatever is mined.
  chainStack = await startChainStack({
    confirmations: 1,
    env: { SVC_X402_RECEIPT_TIMEOUT_MS: '500', SVC_X402_WATCH_INTERVAL_MS: '50' },
  })
  ;({ chain, stack } = chainStack)
}, 30_000)
afterAll(() => chainStack.stop())

const AMOUNT = 2_000_000n
const signupUrl = () => `${stack.url}/v1/x402/signup`

test('a dropped relayer transaction is sent again: later payments settle, each credited once', async () => {
  const payToBefore = await chain.balanceOf(chain.payTo)
  const first = await chain.newPayer(10_000_000n)
  await chain.testClient.setAutomine(false)
  const firstAnswer = pay(signupUrl(), { amountUsdc: '2.000000' }, first)
  let dropped: Record<string, string> | undefined
  await until(async () => {
    dropped = await sentClaim(stack)
    if (!dropped?.tx) return false
    return chain.publicClient.getTransaction({ hash: dropped.tx as Hex }).then(
      () => true,
      () => false,
    )
  })
  await chain.testClient.dropTransaction({ hash: dropped!.tx as Hex })
  await chain.testClient.setAutomine(true)
  expect((await firstAnswer).response.status).toBe(409)

  // Steady traffic: a payment after another, until three of them are credited.
  const later: PrivateKeyAccount[] = []
  let running = true
  const traffic = (async () => {
    while (running) {
      const payer = await chain.newPayer(10_000_000n)
      later.push(payer)
      const { response } = await pay(signupUrl(), { amountUsdc: '2.000000' }, payer)
      expect([200, 201, 409]).toContain(response.status)
    }
  })()
  try {
    await until(async () => {
      if (later.length < 3) return false
      const credited = await Promise.all(later.slice(0, 3).map((payer) => fundedOf(stack, payer)))
      return credited.every((value) => value === AMOUNT)
    }, 50)
  } finally {
    running = false
    await traffic
  }

  // The dropped transaction itself was mined, its bytes as signed, and credited from its claim.
  await until(async () => (await fundedOf(stack, first)) === AMOUNT, 50)
  const receipt = await chain.publicClient.getTransactionReceipt({ hash: dropped!.tx as Hex })
  expect(receipt.status).toBe('success')
  await until(async () => (await stack.store.zcard(stack.keys.paymentsInFlight)) === 0, 50)
  for (const payer of [first, ...later]) expect(await fundedOf(stack, payer)).toBe(AMOUNT)
  const payers = BigInt(later.length + 1)
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + payers * AMOUNT)
}, 60_000)
