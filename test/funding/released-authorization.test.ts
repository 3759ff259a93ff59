// What a released authorization leaves behind. A claim whose transfer a reorg took out, its
// authorization then expired unused: the reconciler releases it, and its record stays marked
// expired, so a replica that read the lost fork's receipt and credits it only now is refused and
// nothing moves. And a pending credit whose transaction a reorg took out, the payer then canceling
// the authorization on the chain that won: no money moved, so once the cancellation is confirmed
// the payment is taken back, as one that expired unused is. The audits, the chain's included, find
// nothing either way.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Hex } from 'viem'
import { auditAll } from '../../src/cli/audit.ts'
import { auditFundingOnChain } from '../../src/funding/audit.ts'
import { fundingChain } from '../../src/funding/chain.ts'
import { authorizationId, PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import { confirmPayments, type WatchDeps } from '../../src/funding/watcher.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { createAccount } from '../helpers/accounts.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { authorizationOf, challenge, xPayment } from '../helpers/x402.ts'

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

const balances = (accountId: string) =>
  stack.store.hmget(stack.keys.account(accountId), 'pending', 'confirmed', 'funded')

async function expectAuditsClean(): Promise<void> {
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
  const { store, keys } = stack
  const onChain = await auditFundingOnChain(
    store,
    keys,
    fundingChain(deps.config),
    chain.chainId,
    chain.usdc,
    chain.payTo,
  )
  expect(onChain.findings).toEqual([])
}

/** A payer with an account, a signed header for 3 USDC, its authorization's id and terms. */
async function signed() {
  const payer = await chain.newPayer(10_000_000n)
  const { accountId } = await createAccount(stack, payer.address)
  const header = await xPayment(
    payer,
    await challenge(`${stack.url}/v1/x402/signup`, { amountUsdc: '3.000000' }),
  )
  const a = authorizationOf(header)
  const auth = authorizationId(chain.chainId, chain.usdc, payer.address, a.nonce)
  const claim = {
    authorizationId: auth,
    kind: 'refill' as const,
    accountId,
    payer: payer.address,
    amount: 3_000_000 as MicroUsdc,
    fromBlock: await chain.publicClient.getBlockNumber(),
    validBefore: BigInt(a.validBefore),
  }
  expect(await ledger.claim(claim)).toEqual({ claimed: true })
  return { payer, accountId, header, nonce: a.nonce as Hex, auth }
}

test('a pending credit whose transaction a reorg took out and whose authorization the payer then canceled is taken back', async () => {
  const { payer, accountId, header, nonce, auth } = await signed()
  const before = await balances(accountId)
  const snapshot = await chain.testClient.snapshot()
  const sent = await chain.sendAuthorization(header)
  const credit = {
    accountId,
    amount: 3_000_000 as MicroUsdc,
    chainId: chain.chainId,
    transaction: sent.transaction,
    authorizationId: auth,
    blockNumber: sent.blockNumber,
    payer: payer.address,
  }
  expect((await ledger.credit(credit)).status).toBe('credited')
  const id = paymentId(chain.chainId, sent.transaction, auth)

  // The chain that won has the payer's cancellation where the transfer was.
  await chain.testClient.revert({ id: snapshot })
  await chain.cancelAuthorization(payer, nonce)
  await chain.testClient.mine({ blocks: 3 })
  await confirmPayments(deps)
  expect(await ledger.payment(id)).toEqual({})
  expect(await balances(accountId)).toEqual(before)
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'taken back', paymentId: id })
  expect(await stack.store.zrange(stack.keys.paymentsUnconfirmed, 0, -1)).toEqual([])
  await expectAuditsClean()
}, 90_000)

// Last: it moves the chain's clock past every authorization signed before.
test('a claim released as expired keeps its mark: a late credit of the lost fork is refused', async () => {
  const { payer, accountId, header, auth } = await signed()
  const before = await balances(accountId)
  const snapshot = await chain.testClient.snapshot()
  const sent = await chain.sendAuthorization(header)
  // The reorg took the transfer out, nobody sent the authorization again, and it expired.
  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.increaseTime({ seconds: deps.config.maxTimeoutSeconds + 120 })
  await chain.testClient.mine({ blocks: 5 })
  expect(await reconcilePayments(deps, 0)).toBe(0)
  expect(await stack.store.zrange(stack.keys.paymentsInFlight, 0, -1)).toEqual([])
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'expired' })
  // Kept past the authorization's life for the record retention, not for ever.
  expect(await stack.store.pttl(stack.keys.authorization(auth))).toBeGreaterThan(0)

  // The replica that held the lost fork's receipt writes its credit only now.
  const unchanged = await snapshotKeys(stack.store, stack.keys.prefix)
  const credit = {
    accountId,
    amount: 3_000_000 as MicroUsdc,
    chainId: chain.chainId,
    transaction: sent.transaction,
    authorizationId: auth,
    blockNumber: sent.blockNumber,
    payer: payer.address,
  }
  expect(await ledger.credit(credit)).toEqual({ status: 'released', state: 'expired' })
  expect(await ledger.claim({ ...credit, kind: 'refill', validBefore: 0n })).toEqual({
    claimed: false,
    state: 'expired',
    transaction: undefined,
  })
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(unchanged)
  expect(await balances(accountId)).toEqual(before)
  expect(await ledger.payment(paymentId(chain.chainId, sent.transaction, auth))).toEqual({})
  await expectAuditsClean()
}, 90_000)
