// A relayer transaction dropped from the pool while the base fee rose past its maxFeePerGas: its
// own signed bytes are refused when broadcast again (anvil answers "max fee per gas less than
// block base fee"), the nonce gap stays, and every later payment waits behind it. The relayer signs
// the same transaction again (its nonce, call and gas limit) at today's fees: the gap fills, later
// payments settle, and the dropped payment's authorization moves money once and is credited once,
// found by the authorization, not by the hash first recorded. Real anvil, real Redis, real HTTP.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { type Hex, keccak256, type PrivateKeyAccount, parseTransaction } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import type { TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { fundedOf, pay, sentClaim } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let chainStack: ChainStack

beforeAll(async () => {
  chainStack = await startChainStack({
    confirmations: 1,
    env: { SVC_X402_RECEIPT_TIMEOUT_MS: '500', SVC_X402_WATCH_INTERVAL_MS: '50' },
  })
  ;({ chain, stack } = chainStack)
}, 30_000)
afterAll(() => chainStack.stop())

const AMOUNT = 2_000_000n
const HELD = 10_000_000n
const signupUrl = () => `${stack.url}/v1/x402/signup`

test('a dropped relayer transaction priced under the base fee is signed again at its nonce: later payments settle, each paid and credited once', async () => {
  const relayer = privateKeyToAccount(chain.relayerKey).address
  const payToBefore = await chain.balanceOf(chain.payTo)
  const first = await chain.newPayer(HELD)
  // Minted before the gap: a mint mines a block, and enough blocks would bring the base fee back
  // under the dropped transaction's fee.
  const later = await Promise.all(Array.from({ length: 6 }, () => chain.newPayer(HELD)))

  await chain.testClient.setAutomine(false)
  const firstAnswer = pay(signupUrl(), { amountUsdc: '2.000000' }, first)
  let dropped: Record<string, string> | undefined
  let signed: Awaited<ReturnType<typeof chain.publicClient.getTransaction>> | undefined
  await until(async () => {
    dropped = await sentClaim(stack)
    if (!dropped?.tx) return false
    signed = await chain.publicClient.getTransaction({ hash: dropped.tx as Hex }).catch(() => undefined)
    return signed !== undefined
  })
  await chain.testClient.dropTransaction({ hash: dropped!.tx as Hex })
  await chain.testClient.setNextBlockBaseFeePerGas({ baseFeePerGas: signed!.maxFeePerGas! * 1_000n })
  await chain.testClient.mine({ blocks: 1 })
  await chain.testClient.setAutomine(true)
  expect((await firstAnswer).response.status).toBe(409)

  // Steady traffic from the payers made before, until three of them are credited.
  const paid: PrivateKeyAccount[] = []
  let running = true
  const traffic = (async () => {
    for (const payer of later) {
      if (!running) break
      paid.push(payer)
      const { response } = await pay(signupUrl(), { amountUsdc: '2.000000' }, payer)
      expect([200, 201, 409]).toContain(response.status)
    }
  })()
  try {
    await until(async () => {
      if (paid.length < 3) return false
      const credited = await Promise.all(paid.slice(0, 3).map((payer) => fundedOf(stack, payer)))
      return credited.every((value) => value === AMOUNT)
    }, 50)
  } finally {
    running = false
    await traffic
  }

  // Mined at the dropped one's nonce, the same call and gas, but not its bytes: one of the two.
  await until(async () => (await fundedOf(stack, first)) === AMOUNT, 50)
  const claim = await stack.store.hgetall(stack.keys.authorization(dropped!.id!))
  expect(claim.state).toBe('credited')
  const minedHash = claim.paymentId!.split(':')[1] as Hex
  expect(minedHash).not.toBe(dropped!.tx!.toLowerCase())
  const mined = await chain.publicClient.getTransaction({ hash: minedHash })
  expect(mined.from.toLowerCase()).toBe(relayer.toLowerCase())
  expect([mined.nonce, mined.to, mined.input, mined.gas]).toEqual([
    signed!.nonce,
    signed!.to,
    signed!.input,
    signed!.gas,
  ])
  expect((await chain.publicClient.getTransactionReceipt({ hash: minedHash })).status).toBe('success')
  await expect(chain.publicClient.getTransactionReceipt({ hash: dropped!.tx as Hex })).rejects.toThrow()
  // The bytes kept at that nonce are the ones sent last.
  const kept = await stack.store.hget(stack.keys.relayerSent(relayer.toLowerCase()), String(signed!.nonce))
  expect(keccak256(kept as Hex)).toBe(minedHash)
  expect(parseTransaction(kept as Hex).nonce).toBe(signed!.nonce)

  await until(async () => (await stack.store.zcard(stack.keys.paymentsInFlight)) === 0, 50)
  for (const payer of [first, ...paid]) {
    expect(await fundedOf(stack, payer)).toBe(AMOUNT)
    expect(await chain.balanceOf(payer.address)).toBe(HELD - AMOUNT)
  }
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + BigInt(paid.length + 1) * AMOUNT)
}, 60_000)
