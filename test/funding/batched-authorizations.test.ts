// One transaction that uses two of a payer's EIP-3009 authorizations (a multicall contract batching
// transferWithAuthorization, as a payer's wallet or a facilitator does), on a real chain: each
// authorization is a payment of its own, credited once by the reconciler, confirmed by the watcher,
// named apart in the audit and the lookup by transaction, and taken back apart by a reorg.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { auditFunding } from '../../src/funding/audit.ts'
import { authorizationId, PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import { confirmPayments, type WatchDeps } from '../../src/funding/watcher.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { auditStackOnChain, stackWatchDeps } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { authorizationOf, challenge, pay, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let ledger: PaymentLedger
let chainStack: ChainStack

beforeAll(async () => {
  // The stack's own watcher stays idle: the tests run its passes themselves.
  chainStack = await startChainStack({ confirmations: 2, env: { SVC_X402_WATCH_INTERVAL_MS: '600000' } })
  ;({ chain, stack } = chainStack)
  deps = stackWatchDeps(stack)
  ledger = new PaymentLedger(stack.store, stack.keys)
}, 60_000)

afterAll(() => chainStack.stop())

const signupUrl = () => `${stack.url}/v1/x402/signup`

const balances = (accountId: string) =>
  stack.store.hmget(stack.keys.account(accountId), 'pending', 'confirmed', 'funded')

const lookup = async (transaction: string) => {
  const response = await fetch(`${stack.url}/v1/x402/payments/${transaction}`)
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

/**
 * A payer with an account, and two of its authorizations (2 and 3 USDC) claimed as the gateway's
 * requests claim them: the headers it sent, whose settlement the batch then beat on chain.
 */
async function twoClaimedAuthorizations() {
  const payer = await chain.newPayer(20_000_000n)
  const { response } = await pay(signupUrl(), { amountUsdc: '1.000000' }, payer)
  expect(response.status).toBe(201)
  const accountId = response.body.accountId as string
  // The signup's own payment confirmed first: only the batch's move the balances after.
  await chain.testClient.mine({ blocks: 2 })
  await confirmPayments(deps)
  const fromBlock = await chain.publicClient.getBlockNumber()
  const claimed = []
  for (const micros of [2_000_000, 3_000_000]) {
    const amountUsdc = `${micros / 1_000_000}.000000`
    const header = await xPayment(payer, await challenge(signupUrl(), { amountUsdc }))
    const { nonce, validBefore } = authorizationOf(header)
    const auth = authorizationId(chain.chainId, chain.usdc, payer.address, nonce)
    const claim = await ledger.claim({
      authorizationId: auth,
      kind: 'refill',
      accountId,
      payer: payer.address,
      amount: micros as MicroUsdc,
      fromBlock,
      validBefore: BigInt(validBefore),
    })
    expect(claim).toEqual({ claimed: true })
    claimed.push({ header, auth, amountUsdc })
  }
  return { accountId, claimed }
}

/** Both audits clean; how many payments the chain's read back. */
const audited = async () => {
  expect(await auditFunding(stack.store, stack.keys)).toEqual([])
  const onChain = await auditStackOnChain(stack, chain)
  expect(onChain.findings).toEqual([])
  return onChain.checked
}

test('two authorizations settled by one transaction: each credited once, confirmed, audited, looked up', async () => {
  const { accountId, claimed } = await twoClaimedAuthorizations()
  const before = (await balances(accountId)).map(Number)
  const batch = await chain.sendAuthorizations(claimed.map((c) => c.header))
  const ids = claimed.map((c) => paymentId(chain.chainId, batch.transaction, c.auth))

  // The reconciler finds each authorization used by the batch: both credited, once each.
  expect(await reconcilePayments(deps, 0)).toBe(2)
  expect(await reconcilePayments(deps, 0)).toBe(0)
  expect(await stack.store.zrange(stack.keys.paymentsInFlight, 0, -1)).toEqual([])
  expect(await balances(accountId)).toEqual([
    String(before[0]! + 5_000_000),
    String(before[1]),
    String(before[2]! + 5_000_000),
  ])
  for (const [i, c] of claimed.entries())
    expect(await ledger.authorization(c.auth)).toMatchObject({ state: 'credited', paymentId: ids[i] })

  // A replayed header credits nothing: it names the batch that settled it.
  const replay = await post(
    signupUrl(),
    { amountUsdc: claimed[1]!.amountUsdc },
    { 'x-payment': claimed[1]!.header },
  )
  expect(replay.status).toBe(409)
  expect(replay.body.error).toMatchObject({
    code: 'payment_already_credited',
    transaction: batch.transaction,
  })

  // Confirmed at depth, each once.
  await chain.testClient.mine({ blocks: 2 })
  expect(await confirmPayments(deps)).toBe(2)
  expect(await confirmPayments(deps)).toBe(0)
  expect(await balances(accountId)).toEqual([
    String(before[0]),
    String(before[1]! + 5_000_000),
    String(before[2]! + 5_000_000),
  ])
  expect(await audited()).toBeGreaterThanOrEqual(3)

  // Asked by the batch's hash: both payments, and the transaction as a whole.
  const asked = await lookup(batch.transaction)
  expect(asked.status).toBe(200)
  expect(asked.body).toEqual({
    transaction: batch.transaction.toLowerCase(),
    amountUsdc: '5.000000',
    status: 'confirmed',
    confirmationsRequired: 2,
    payments: [...ids].sort().map((id) => ({
      paymentId: id,
      transaction: batch.transaction.toLowerCase(),
      amountUsdc: id === ids[0] ? '2.000000' : '3.000000',
      status: 'confirmed',
    })),
  })
}, 90_000)

// Last in the file: the reverted chain leaves the relayer's recorded nonce ahead of it.
test('a reorg takes the batch out and neither authorization is sent again: both taken back, once each', async () => {
  const { accountId, claimed } = await twoClaimedAuthorizations()
  const before = await balances(accountId)
  const snapshot = await chain.testClient.snapshot()
  const batch = await chain.sendAuthorizations(claimed.map((c) => c.header))
  expect(await reconcilePayments(deps, 0)).toBe(2)
  expect((await balances(accountId)).map(Number)[2]).toBe(Number(before[2]) + 5_000_000)

  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.mine({ blocks: 5 })
  await confirmPayments(deps)
  expect((await balances(accountId)).map(Number)[0]).toBe(Number(before[0]) + 5_000_000)

  // Past their validBefore at a confirmed block, unused: each taken back.
  await chain.testClient.increaseTime({ seconds: stack.config.funding!.maxTimeoutSeconds + 120 })
  await chain.testClient.mine({ blocks: 3 })
  await confirmPayments(deps)
  expect(await balances(accountId)).toEqual(before)
  for (const c of claimed) expect(await ledger.authorization(c.auth)).toMatchObject({ state: 'taken back' })
  await confirmPayments(deps)
  expect(await balances(accountId)).toEqual(before)
  await audited()
  const asked = await lookup(batch.transaction)
  expect(asked.status).toBe(200)
  expect(asked.body).toMatchObject({ amountUsdc: '5.000000', status: 'reversed' })
  expect(asked.body.payments).toHaveLength(2)
}, 90_000)
