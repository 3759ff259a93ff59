// A claim in flight whose authorization reads unused and expired at the head, one block past the
// last block before its validBefore: a reorg within SVC_CONFIRMATIONS may still replace that block
// with one that mines the transfer. The reconciler lets the claim go only once "unused and expired"
// holds at a confirmed block, so the transfer the winning chain mined is credited: money that moved
// always reaches the buyer's account.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { authorizationId, PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { createAccount } from '../helpers/accounts.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let ledger: PaymentLedger
let chainStack: ChainStack

beforeAll(async () => {
  chainStack = await startChainStack({ confirmations: 2, env: { SVC_X402_WATCH_INTERVAL_MS: '600000' } })
  ;({ chain, stack } = chainStack)
  deps = stackWatchDeps(stack)
  ledger = new PaymentLedger(stack.store, stack.keys)
}, 60_000)

afterAll(() => chainStack.stop())

test('a claim read expired at the head stays until a confirmed block says so: a reorg that mines its transfer gets it credited', async () => {
  const payer = await chain.newPayer(10_000_000n)
  const { accountId } = await createAccount(stack, payer.address)
  const header = await xPayment(
    payer,
    await challenge(`${stack.url}/v1/x402/signup`, { amountUsdc: '3.000000' }),
  )
  const a = JSON.parse(Buffer.from(header, 'base64').toString()).payload.authorization
  const auth = authorizationId(chain.chainId, chain.usdc, payer.address, a.nonce)
  expect(
    await ledger.claim({
      authorizationId: auth,
      kind: 'refill',
      accountId,
      payer: payer.address,
      amount: 3_000_000 as MicroUsdc,
      fromBlock: await chain.publicClient.getBlockNumber(),
      validBefore: BigInt(a.validBefore),
    }),
  ).toEqual({ claimed: true })
  const payToBefore = await chain.balanceOf(chain.payTo)

  // The fork that loses: one block past validBefore, the transfer not in it.
  const snapshot = await chain.testClient.snapshot()
  await chain.testClient.increaseTime({ seconds: deps.config.maxTimeoutSeconds + 120 })
  await chain.testClient.mine({ blocks: 1 })
  const head = await chain.publicClient.getBlock({ blockTag: 'latest' })
  expect(head.timestamp).toBeGreaterThanOrEqual(BigInt(a.validBefore))
  expect(await reconcilePayments(deps, 0)).toBe(0)
  // Expired only at the head, one block deep: the claim waits.
  expect(await stack.store.zrange(stack.keys.paymentsInFlight, 0, -1)).toEqual([auth])
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'claimed' })

  // The chain that wins replaced that block with one that mines the transfer, before validBefore.
  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.setNextBlockTimestamp({ timestamp: BigInt(a.validBefore) - 30n })
  const sent = await chain.sendAuthorization(header)
  await chain.testClient.mine({ blocks: 1 })
  expect((await chain.balanceOf(chain.payTo)) - payToBefore).toBe(3_000_000n)

  // The money moved: the reconciler credits it, and the buyer's account holds it.
  expect(await reconcilePayments(deps, 0)).toBe(1)
  expect(await stack.store.zrange(stack.keys.paymentsInFlight, 0, -1)).toEqual([])
  const id = paymentId(chain.chainId, sent.transaction, auth)
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'credited', paymentId: id })
  expect(await ledger.payment(id)).toMatchObject({ accountId, amount: '3000000' })
  expect(await stack.store.hget(stack.keys.account(accountId), 'pending')).toBe('3000000')
}, 90_000)
