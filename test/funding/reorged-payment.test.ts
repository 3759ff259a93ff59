// A credited payment whose transaction a reorg took out. Anyone holding the signed authorization
// may send it again (the payer's own relayer, another facilitator): once the recorded transaction
// has stayed missing, the confirmations watcher finds the one that used the authorization, moves
// the payment there and confirms it at depth; the audits, the chain's included, agree. An
// authorization no transaction used before it expired moved no money: the pending credit is
// taken back, and the account's endpoint told so (funding.reversed). Each step once, whatever
// pass runs again.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { authorizationId, PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import { confirmPayments, type WatchDeps } from '../../src/funding/watcher.ts'
import { formatMicros, type MicroUsdc } from '../../src/money/units.ts'
import { PaymentCode } from '../../src/redis/result-codes.ts'
import { createAccount, settledPayment } from '../helpers/accounts.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { auditStackOnChain, onlyPaymentOf, stackWatchDeps } from '../helpers/funding-watch.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { authorizationOf, challenge, post, xPayment } from '../helpers/x402.ts'
import { registerWebhook, startReceiver, startWebhookStack } from '../webhooks/helpers.ts'

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let ledger: PaymentLedger
/** A pending payment of the first test's, made up (no transaction backs it): the chain's audit names it. */
let madeUp = ''

beforeAll(async () => {
  chain = await startChain()
  // The stack's own watcher stays idle: the tests run its passes themselves. It delivers webhooks
  // to loopback, where the tests' receiver listens.
  stack = await startWebhookStack({ ...chain.env(2), SVC_X402_WATCH_INTERVAL_MS: '600000' })
  deps = stackWatchDeps(stack)
  ledger = new PaymentLedger(stack.store, stack.keys)
}, 60_000)

const receiver = startReceiver()

afterAll(async () => {
  await stack.stop()
  await chain.stop()
  await receiver.stop()
})

const balances = (accountId: string) =>
  stack.store.hmget(stack.keys.account(accountId), 'pending', 'confirmed', 'funded')

const readChain = () => auditStackOnChain(stack, chain)

const nonceOf = (header: string) => authorizationOf(header).nonce

// First in the file: the reverted chain leaves the relayer's recorded nonce ahead of it, so the
// tests after send nothing through the gateway's relayer.
test('its authorization used by another transaction: the payment moves there and confirms at depth', async () => {
  const url = `${stack.url}/v1/x402/signup`
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(payer, await challenge(url, { amountUsdc: '5.000000' }))
  const snapshot = await chain.testClient.snapshot()
  const response = await post(url, { amountUsdc: '5.000000' }, { 'x-payment': header })
  expect(response.status).toBe(201)
  const accountId = response.body.accountId as string
  const first = await onlyPaymentOf(ledger, chain.chainId, response.body.transaction as string)
  expect(await balances(accountId)).toEqual(['5000000', '0', '5000000'])

  // The reorg: the gateway's transaction is gone; the same signed authorization is sent by another.
  await chain.testClient.revert({ id: snapshot })
  const second = await chain.sendAuthorization(header)
  const moved = paymentId(
    chain.chainId,
    second.transaction,
    authorizationId(chain.chainId, chain.usdc, payer.address, nonceOf(header)),
  )
  expect(moved).not.toBe(first)

  // Missing at the depth that would have confirmed it: not yet searched for.
  await chain.testClient.mine({ blocks: 1 })
  await confirmPayments(deps)
  expect(await stack.store.hget(stack.keys.payment(first), 'state')).toBe('pending')

  // Still missing SVC_CONFIRMATIONS blocks later: moved, then confirmed from the new block.
  await chain.testClient.mine({ blocks: 3 })
  await confirmPayments(deps)
  await confirmPayments(deps)
  expect(await stack.store.hgetall(stack.keys.payment(first))).toEqual({})
  expect(await ledger.payment(moved)).toMatchObject({
    state: 'confirmed',
    accountId,
    amount: '5000000',
    blockNumber: String(second.blockNumber),
    movedFrom: first,
  })
  const auth = authorizationId(chain.chainId, chain.usdc, payer.address, nonceOf(header))
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'credited', paymentId: moved })
  expect(await balances(accountId)).toEqual(['0', '5000000', '5000000'])
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
  expect((await readChain()).findings).toEqual([])
  // Asked by its old hash (what a client polling since the credit holds), the payment answers as it is now.
  const old = response.body.transaction as string
  const asked = await fetch(`${stack.url}/v1/x402/payments/${old}`)
  expect(asked.status).toBe(200)
  expect(await asked.json()).toEqual({
    transaction: second.transaction.toLowerCase(),
    amountUsdc: '5.000000',
    status: 'confirmed',
    confirmationsRequired: 2,
    movedFrom: old.toLowerCase(),
  })

  // Once: again, nothing changes; the move replayed has nothing to do.
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  await confirmPayments(deps)
  expect(await ledger.move(first, moved, second.blockNumber)).toEqual({ status: 'nothing_to_do' })
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  // The payer's header is a replay of the payment, now by the transaction that settled it.
  const replay = await post(url, { amountUsdc: '5.000000' }, { 'x-payment': header })
  expect(replay.status).toBe(409)
  expect(replay.body.error).toMatchObject({
    code: 'payment_already_credited',
    transaction: second.transaction,
  })

  // A transaction backs one payment: another pending payment is never moved onto it.
  const other = settledPayment(accountId, 1_000_000)
  expect((await ledger.credit(other)).status).toBe('credited')
  const otherId = paymentId(other.chainId, other.transaction, other.authorizationId)
  madeUp = `payment ${otherId}`
  expect(await ledger.move(otherId, moved, second.blockNumber)).toEqual({
    status: 'refused',
    code: PaymentCode.TransactionTaken,
  })
  expect(await ledger.payment(otherId)).toMatchObject({ state: 'pending' })
}, 90_000)

test('its authorization unused and expired: the pending credit is taken back, once, and the account told', async () => {
  const { accountId, apiKey } = await createAccount(stack)
  const hook = await registerWebhook(stack, apiKey, '/v1/agent', {
    url: receiver.url,
    events: ['funding.reversed'],
  })
  expect(hook.status).toBe(201)
  const endpoint = (await hook.json()) as { id: string }
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(
    payer,
    await challenge(`${stack.url}/v1/x402/signup`, { amountUsdc: '3.000000' }),
  )
  const { validBefore } = authorizationOf(header)
  const auth = authorizationId(chain.chainId, chain.usdc, payer.address, nonceOf(header))
  const claimed = await ledger.claim({
    authorizationId: auth,
    kind: 'refill',
    accountId,
    payer: payer.address,
    amount: 3_000_000 as MicroUsdc,
    fromBlock: await chain.publicClient.getBlockNumber(),
    validBefore: BigInt(validBefore),
  })
  expect(claimed.claimed).toBe(true)
  const before = await balances(accountId)
  const snapshot = await chain.testClient.snapshot()
  const sent = await chain.sendAuthorization(header)
  const credited = await ledger.credit({
    accountId,
    amount: 3_000_000 as MicroUsdc,
    chainId: chain.chainId,
    transaction: sent.transaction,
    authorizationId: auth,
    blockNumber: sent.blockNumber,
    payer: payer.address,
  })
  expect(credited.status).toBe('credited')
  const id = paymentId(chain.chainId, sent.transaction, auth)

  // The reorg took the transaction out and nobody sent the authorization again.
  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.mine({ blocks: 5 })
  // While it may still be used, the credit waits.
  await confirmPayments(deps)
  expect(await ledger.payment(id)).toMatchObject({ state: 'pending' })
  const [pending, confirmed, funded] = before.map(Number)
  expect(await balances(accountId)).toEqual([
    String(pending! + 3_000_000),
    String(confirmed),
    String(funded! + 3_000_000),
  ])

  // Past its validBefore at a confirmed block, unused: taken back.
  await chain.testClient.increaseTime({ seconds: stack.config.funding!.maxTimeoutSeconds + 120 })
  await chain.testClient.mine({ blocks: 3 })
  await confirmPayments(deps)
  expect(await stack.store.hgetall(stack.keys.payment(id))).toEqual({})
  // The authorization's record stays, marked: what refuses a late credit of the lost transaction.
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'taken back', paymentId: id })
  expect(await stack.store.zscore(stack.keys.paymentsUnconfirmed, id)).toBeNull()
  expect(await balances(accountId)).toEqual(before)
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
  expect((await readChain()).findings.filter((f) => f.subject !== madeUp)).toEqual([])
  // Asked by its hash (what a client polling since the credit holds), the payment answers it was
  // reversed: final, not the 404 of one not credited yet.
  const asked = await fetch(`${stack.url}/v1/x402/payments/${sent.transaction}`)
  expect(asked.status).toBe(200)
  expect(await asked.json()).toEqual({
    transaction: sent.transaction.toLowerCase(),
    amountUsdc: '3.000000',
    status: 'reversed',
    confirmationsRequired: 2,
    reversedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
  })

  // The endpoint gets funding.reversed: what was taken back, and what is left pending.
  const owner = `acct:${accountId}`
  const stream = stack.keys.webhookEvents(owner)
  const tries = stack.keys.webhookTries(owner, endpoint.id)
  // Received, then acknowledged, then its tries dropped: the consumer is done with it.
  await until(
    async () =>
      receiver.received.length > 0 &&
      Number(((await stack.store.xpending(stream, 'deliver')) as [number])[0]) === 0 &&
      (await stack.store.hlen(tries)) === 0,
  )
  const reversed = {
    type: 'funding.reversed',
    data: { paymentId: id, amountUsdc: '3.000000', pendingUsdc: formatMicros(Number(before[0])) },
  }
  expect(receiver.unique().map((r) => JSON.parse(r.body))).toEqual([expect.objectContaining(reversed)])

  // Once: again, nothing changes, and no second event is written.
  const after = await snapshotKeys(stack.store, stack.keys.prefix)
  await confirmPayments(deps)
  expect(await ledger.takeBack(id, accountId)).toEqual({ status: 'nothing_to_do' })
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(after)
  expect(await stack.store.xlen(stream)).toBe(1)
  expect(receiver.unique()).toHaveLength(1)
}, 90_000)
