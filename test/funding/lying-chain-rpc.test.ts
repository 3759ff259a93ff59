// The funding loops behind an RPC that lies (a proxy of the test's own in front of the local
// chain): nothing it says moves money unchecked. A receipt whose logs hold one transfer for two
// authorizations of the same payer and amount credits one of them, never both; a balancer that
// moves to another chain between two calls of a pass never takes back a credit on that chain's
// word (no receipt there, the authorization unused and expired there).
import { afterAll, beforeAll, beforeEach, expect, test } from 'bun:test'
import type { Hex } from 'viem'
import { createFunding, watchDeps } from '../../src/funding/index.ts'
import { authorizationId, PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import { confirmPayments, type WatchDeps } from '../../src/funding/watcher.ts'
import { createLogger } from '../../src/logger.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import { type LyingRpc, startLyingRpc } from '../helpers/lying-rpc.ts'
import type { TestStack } from '../helpers/stack.ts'
import { authorizationOf, challenge, pay, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let rpc: LyingRpc
let chainStack: ChainStack
let ledger: PaymentLedger
/** The watcher's passes, reading the chain through the lying RPC. */
let lied: WatchDeps
const CONFIRMATIONS = 2

beforeAll(async () => {
  // The stack's own watcher stays idle: the tests run its passes themselves.
  chainStack = await startChainStack({
    confirmations: CONFIRMATIONS,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000' },
  })
  ;({ chain, stack } = chainStack)
  rpc = startLyingRpc(chain.rpcUrl)
  ledger = new PaymentLedger(stack.store, stack.keys)
  const logger = createLogger('silent')
  const funding = createFunding(
    { ...stack.config.funding!, chainRpcUrl: rpc.url },
    stack.store,
    stack.keys,
    logger,
    stack.config.records.recordRetentionDays * 86_400_000,
  )
  lied = watchDeps(funding, logger, stackWatchDeps(stack).resolveAccount)
}, 60_000)

afterAll(async () => {
  rpc.stop()
  await chainStack.stop()
})

beforeEach(() => {
  rpc.route(chain.rpcUrl)
  rpc.lie(null)
})

const signupUrl = () => `${stack.url}/v1/x402/signup`

const balances = (accountId: string) =>
  stack.store.hmget(stack.keys.account(accountId), 'pending', 'confirmed', 'funded')

/** A payer with an account (its signup confirmed), and `count` of its 2 USDC authorizations claimed. */
async function claimedAuthorizations(count: number) {
  const payer = await chain.newPayer(20_000_000n)
  const { response } = await pay(signupUrl(), { amountUsdc: '1.000000' }, payer)
  expect(response.status).toBe(201)
  const accountId = response.body.accountId as string
  await chain.testClient.mine({ blocks: CONFIRMATIONS })
  await confirmPayments(stackWatchDeps(stack))
  const fromBlock = await chain.publicClient.getBlockNumber()
  const claimed = []
  for (let i = 0; i < count; i++) {
    const header = await xPayment(payer, await challenge(signupUrl(), { amountUsdc: '2.000000' }))
    const { nonce, validBefore } = authorizationOf(header)
    const auth = authorizationId(chain.chainId, chain.usdc, payer.address, nonce)
    const claim = await ledger.claim({
      authorizationId: auth,
      kind: 'refill',
      accountId,
      payer: payer.address,
      amount: 2_000_000 as MicroUsdc,
      fromBlock,
      validBefore: BigInt(validBefore),
    })
    expect(claim).toEqual({ claimed: true })
    claimed.push({ header, auth })
  }
  return { accountId, claimed }
}

test('two authorizations of one payer and amount in one transaction, its receipt answered with one transfer: one credited, the other only once the RPC tells the truth', async () => {
  const { accountId, claimed } = await claimedAuthorizations(2)
  const before = (await balances(accountId)).map(Number)
  const batch = await chain.sendAuthorizations(claimed.map((c) => c.header))
  // The receipt loses the second authorization's transfer: its AuthorizationUsed stays.
  let forged = 0
  rpc.lie(async (call, real) => {
    const answer = await real()
    const receipt = answer.result as { transactionHash: string; logs: { logIndex: Hex }[] } | null
    if (call.method !== 'eth_getTransactionReceipt' || receipt?.transactionHash !== batch.transaction)
      return answer
    forged++
    return { result: { ...receipt, logs: receipt.logs.filter((log) => Number(log.logIndex) !== 3) } }
  })
  expect(await reconcilePayments(lied, 0)).toBe(1)
  expect(forged).toBeGreaterThan(0)
  expect(await ledger.authorization(claimed[0]!.auth)).toMatchObject({
    state: 'credited',
    paymentId: paymentId(chain.chainId, batch.transaction, claimed[0]!.auth),
  })
  expect(await ledger.authorization(claimed[1]!.auth)).toMatchObject({ state: 'claimed' })
  expect((await balances(accountId)).map(Number)).toEqual([
    before[0]! + 2_000_000,
    before[1]!,
    before[2]! + 2_000_000,
  ])
  // Again on the same word: nothing more.
  expect(await reconcilePayments(lied, 0)).toBe(0)

  rpc.lie(null)
  expect(await reconcilePayments(lied, 0)).toBe(1)
  expect(await reconcilePayments(lied, 0)).toBe(0)
  expect((await balances(accountId)).map(Number)).toEqual([
    before[0]! + 4_000_000,
    before[1]!,
    before[2]! + 4_000_000,
  ])
}, 90_000)

test('a balancer moving to another chain mid-pass, where the payment has no receipt and its authorization expired unused: the credit is never taken back; confirmed once back', async () => {
  const payer = await chain.newPayer(20_000_000n)
  const { response } = await pay(signupUrl(), { amountUsdc: '3.000000' }, payer)
  expect(response.status).toBe(201)
  const accountId = response.body.accountId as string
  const pending = await balances(accountId)
  expect(Number(pending[0])).toBeGreaterThan(0)
  // Another network's node with the same token, far ahead and past the authorization's life.
  const other = await startChain(31_337)
  try {
    await other.testClient.increaseTime({ seconds: stack.config.funding!.maxTimeoutSeconds + 600 })
    await other.testClient.mine({ blocks: Number(await chain.publicClient.getBlockNumber()) + 50 })
    // The pass's first call is answered by the funding chain; every call after it by the other.
    let switched = false
    rpc.lie(async (_call, real) => {
      const answer = await real()
      if (!switched) {
        switched = true
        rpc.route(other.rpcUrl)
      }
      return answer
    })
    await confirmPayments(lied)
    expect(switched).toBe(true)
    expect(await balances(accountId)).toEqual(pending)
    // Then the whole pass.
    rpc.lie(null)
    rpc.route(other.rpcUrl)
    await confirmPayments(lied)
    expect(await balances(accountId)).toEqual(pending)
  } finally {
    await other.stop()
  }
  rpc.route(chain.rpcUrl)
  await chain.testClient.mine({ blocks: CONFIRMATIONS })
  // This payment and the earlier test's, each once.
  expect(await confirmPayments(lied)).toBeGreaterThanOrEqual(1)
  expect(await confirmPayments(lied)).toBe(0)
  const [p, c, f] = (await balances(accountId)).map(Number)
  expect([p, c, f]).toEqual([
    Number(pending[0]) - 3_000_000,
    Number(pending[1]) + 3_000_000,
    Number(pending[2]),
  ])
}, 90_000)
