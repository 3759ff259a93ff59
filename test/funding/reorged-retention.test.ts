// What a reorged payment's old id keeps (x402:moved:, x402:reversed:) is kept for the record
// retention, then goes: no step that moves money reads it. Once it has gone, a replay of the
// payment is still refused for the reason that outlives it (the authorization's record and its
// nonce used on chain; an authorization expired unused), nothing is credited or taken back twice,
// and the audits, the chain's included, stay clean.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { authorizationId, PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import { confirmPayments, type WatchDeps } from '../../src/funding/watcher.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { createAccount } from '../helpers/accounts.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import {
  auditStackOnChain,
  creditedBeforeReorg,
  onlyPaymentOf,
  stackWatchDeps,
} from '../helpers/funding-watch.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { authorizationOf, challenge, post, xPayment } from '../helpers/x402.ts'

const RETENTION_DAYS = 3
const RETENTION_MS = RETENTION_DAYS * 86_400_000

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let ledger: PaymentLedger
let chainStack: ChainStack

beforeAll(async () => {
  // The stack's own watcher stays idle: the tests run its passes themselves.
  chainStack = await startChainStack({
    confirmations: 2,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000', SVC_RECORD_RETENTION_DAYS: String(RETENTION_DAYS) },
  })
  ;({ chain, stack } = chainStack)
  deps = stackWatchDeps(stack)
  ledger = new PaymentLedger(stack.store, stack.keys)
}, 60_000)

afterAll(() => chainStack.stop())

const balances = (accountId: string) =>
  stack.store.hmget(stack.keys.account(accountId), 'pending', 'confirmed', 'funded')

const readChain = () => auditStackOnChain(stack, chain)

const nonceOf = (header: string) => authorizationOf(header).nonce

/** Kept for the configured record retention (less the moments since it was written), then made to expire now. */
async function keptForRetentionThenExpired(key: string): Promise<void> {
  const ttl = await stack.store.pttl(key)
  expect(ttl).toBeGreaterThan(RETENTION_MS - 600_000)
  expect(ttl).toBeLessThanOrEqual(RETENTION_MS)
  await stack.store.pexpire(key, 1)
  await until(async () => (await stack.store.exists(key)) === 0)
}

const lookup = async (transaction: string) => {
  const response = await fetch(`${stack.url}/v1/x402/payments/${transaction}`)
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

// First in the file: the reverted chain leaves the relayer's recorded nonce ahead of it, so the
// test after sends nothing through the gateway's relayer.
test('a moved payment: its old id is kept for the record retention; once gone, a replay is still refused and the audits stay clean', async () => {
  const url = `${stack.url}/v1/x402/signup`
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(payer, await challenge(url, { amountUsdc: '5.000000' }))
  const snapshot = await chain.testClient.snapshot()
  const response = await post(url, { amountUsdc: '5.000000' }, { 'x-payment': header })
  expect(response.status).toBe(201)
  const accountId = response.body.accountId as string
  const old = response.body.transaction as string
  const first = await onlyPaymentOf(new PaymentLedger(stack.store, stack.keys), chain.chainId, old)

  // The reorg took the gateway's transaction out; another sent the same signed authorization.
  await chain.testClient.revert({ id: snapshot })
  const second = await chain.sendAuthorization(header)
  const moved = paymentId(
    chain.chainId,
    second.transaction,
    authorizationId(chain.chainId, chain.usdc, payer.address, nonceOf(header)),
  )
  await chain.testClient.mine({ blocks: 4 })
  await confirmPayments(deps)
  await confirmPayments(deps)
  expect(await ledger.payment(moved)).toMatchObject({ state: 'confirmed', movedFrom: first })
  expect(await balances(accountId)).toEqual(['0', '5000000', '5000000'])
  expect((await lookup(old)).body).toMatchObject({ transaction: second.transaction.toLowerCase() })

  await keptForRetentionThenExpired(stack.keys.paymentMovedTo(first))

  // The old hash is past its retention: unknown to the lookup; the payment answers by its own.
  expect((await lookup(old)).status).toBe(404)
  expect((await lookup(second.transaction)).body).toMatchObject({
    status: 'confirmed',
    amountUsdc: '5.000000',
  })
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
  expect((await readChain()).findings).toEqual([])

  // Nothing credits or moves it again: the authorization's record names the payment it became,
  // and the chain refuses its nonce, used.
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const replay = await post(url, { amountUsdc: '5.000000' }, { 'x-payment': header })
  expect(replay.status).toBe(409)
  expect(replay.body.error).toMatchObject({
    code: 'payment_already_credited',
    transaction: second.transaction,
  })
  const auth = authorizationId(chain.chainId, chain.usdc, payer.address, nonceOf(header))
  const lateCredit = await ledger.credit({
    accountId,
    amount: 5_000_000 as MicroUsdc,
    chainId: chain.chainId,
    transaction: old,
    authorizationId: auth,
    blockNumber: second.blockNumber,
    payer: payer.address,
  })
  expect(lateCredit).toEqual({ status: 'already_credited', paymentId: moved })
  expect(await ledger.move(first, moved, second.blockNumber)).toEqual({ status: 'nothing_to_do' })
  expect(await ledger.takeBack(first, accountId)).toEqual({ status: 'nothing_to_do' })
  await confirmPayments(deps)
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  await expect(chain.sendAuthorization(header)).rejects.toThrow('authorization is used')
  expect(await balances(accountId)).toEqual(['0', '5000000', '5000000'])
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
}, 90_000)

test('a payment taken back: its reversal is kept for the record retention; once gone, a replay is still refused as expired and the audits stay clean', async () => {
  const { accountId } = await createAccount(stack)
  const payer = await chain.newPayer(10_000_000n)
  const url = `${stack.url}/v1/x402/signup`
  const before = await balances(accountId)
  const { header, snapshot, sent, id } = await creditedBeforeReorg(ledger, chain, url, payer, accountId)

  // The reorg took the transaction out, nobody sent the authorization again, and it expired.
  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.increaseTime({ seconds: stack.config.funding!.maxTimeoutSeconds + 120 })
  await chain.testClient.mine({ blocks: 5 })
  await confirmPayments(deps)
  expect(await ledger.payment(id)).toEqual({})
  expect(await balances(accountId)).toEqual(before)
  expect((await lookup(sent.transaction)).body).toMatchObject({ status: 'reversed' })

  await keptForRetentionThenExpired(stack.keys.paymentReversed(id))

  // Past its retention the lookup no longer knows the transaction; the audits have nothing to miss.
  expect((await lookup(sent.transaction)).status).toBe(404)
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
  expect((await readChain()).findings).toEqual([])

  // The replay is refused by the chain (the authorization expired), and nothing is kept of it;
  // the take-back run again takes nothing.
  const unchanged = await snapshotKeys(stack.store, stack.keys.prefix)
  const replay = await post(url, { amountUsdc: '3.000000' }, { 'x-payment': header })
  expect(replay.status).toBe(402)
  expect(replay.body.error).toStartWith('payment verification failed')
  await expect(chain.sendAuthorization(header)).rejects.toThrow('authorization is expired')
  expect(await ledger.takeBack(id, accountId)).toEqual({ status: 'nothing_to_do' })
  await confirmPayments(deps)
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(unchanged)
  expect(await balances(accountId)).toEqual(before)
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
}, 90_000)
