// The funding scripts against a real Redis, directly and under concurrency: an authorization is
// claimed once, a payment is credited once (by transaction and authorization, and by authorization), and a credit
// moves from pending to confirmed once.
import { afterAll, beforeEach, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { authorizationId, PaymentLedger, paymentId, transactionPaymentId } from '../../src/funding/ledger.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { ACCOUNT_TABLE, type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore } from '../../src/redis/store.ts'
import { snapshotKeys, testPrefix, testRedisUrl } from '../helpers/stack.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-ledger' })
afterAll(() => store.close())

let keys: Keyspace
let ledger: PaymentLedger
const ACCOUNT = 'acct-1'
const PAYER = '0x1111111111111111111111111111111111111111'
const TOKEN = '0x2222222222222222222222222222222222222222'
const hex32 = () => `0x${randomBytes(32).toString('hex')}`
const amount = (n: number) => n as MicroUsdc

beforeEach(async () => {
  keys = keyspace(testPrefix())
  ledger = new PaymentLedger(store, keys)
  // The account hash as the accounts module writes it (only the fields these scripts read).
  await store.hset(keys.account(ACCOUNT), {
    id: ACCOUNT,
    confirmed: 0,
    pending: 0,
    held: 0,
    spent: 0,
    funded: 0,
  })
})

const balances = async () => {
  const b = await store.hgetall(keys.account(ACCOUNT))
  return { confirmed: Number(b.confirmed), pending: Number(b.pending), funded: Number(b.funded) }
}

const credit = (auth: string, tx: string, micros = 5_000_000) =>
  ledger.credit({
    accountId: ACCOUNT,
    amount: amount(micros),
    chainId: 84532,
    transaction: tx,
    authorizationId: auth,
    blockNumber: 10n,
    payer: PAYER,
  })

test('an authorization is claimed once; a release frees it; a credited one is never released', async () => {
  const auth = authorizationId(84532, TOKEN, PAYER, hex32())
  const claim = {
    authorizationId: auth,
    kind: 'refill' as const,
    accountId: ACCOUNT,
    payer: PAYER,
    amount: amount(1_000_000),
    fromBlock: 7n,
    validBefore: 1_900_000_000n,
  }
  expect(await ledger.claim(claim)).toEqual({ claimed: true })
  expect(await ledger.authorization(auth)).toMatchObject({ validBefore: '1900000000' })
  // A release as read before the claim was marked sent changes nothing.
  const tx = hex32()
  await ledger.markSent(auth, tx)
  expect(await ledger.claim(claim)).toEqual({ claimed: false, state: 'sent', transaction: tx })
  expect(await ledger.inFlightBefore(Date.now() + 1000)).toEqual([auth])
  expect(await ledger.release(auth)).toBe(false)
  expect(await ledger.release(auth, hex32())).toBe(false)
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'sent', tx })
  expect(await ledger.release(auth, tx)).toBe(true)
  // Gone: neither its transaction nor its first block is written back half-made.
  await expect(ledger.markSent(auth, tx)).rejects.toThrow('no longer in flight')
  await expect(ledger.recordFromBlock(auth, 9n)).rejects.toThrow('no longer in flight')
  expect(await store.exists(keys.authorization(auth))).toBe(0)
  expect(await ledger.inFlightBefore(Date.now() + 1000)).toEqual([])
  expect(await ledger.claim(claim)).toEqual({ claimed: true })
  expect((await credit(auth, tx, 1_000_000)).status).toBe('credited')
  expect(await ledger.release(auth)).toBe(false)
  expect(await ledger.inFlightBefore(Date.now() + 1000)).toEqual([])
})

test('a payment is credited to pending and funded once, by transaction and by authorization', async () => {
  const auth = authorizationId(84532, TOKEN, PAYER, hex32())
  const tx = hex32()
  expect(await credit(auth, tx)).toEqual({
    status: 'credited',
    pending: amount(5_000_000),
    funded: amount(5_000_000),
  })
  expect(await credit(auth, tx)).toEqual({
    status: 'already_credited',
    paymentId: paymentId(84532, tx, auth),
  })
  // The same authorization under another transaction hash is the same money.
  expect((await credit(auth, hex32())).status).toBe('already_credited')
  expect(await balances()).toEqual({ confirmed: 0, pending: 5_000_000, funded: 5_000_000 })
  expect(await ledger.unconfirmedUpTo(10n)).toEqual([paymentId(84532, tx, auth)])
})

test('one transaction that used two authorizations is two payments, each credited once', async () => {
  const tx = hex32()
  const [first, second] = [
    authorizationId(84532, TOKEN, PAYER, hex32()),
    authorizationId(84532, TOKEN, PAYER, hex32()),
  ]
  expect((await credit(first, tx, 2_000_000)).status).toBe('credited')
  expect((await credit(second, tx, 3_000_000)).status).toBe('credited')
  expect((await credit(first, tx, 2_000_000)).status).toBe('already_credited')
  expect((await credit(second, tx, 3_000_000)).status).toBe('already_credited')
  expect(await balances()).toEqual({ confirmed: 0, pending: 5_000_000, funded: 5_000_000 })
  const ids = [paymentId(84532, tx, first), paymentId(84532, tx, second)].sort()
  expect(await ledger.paymentsOf(84532, tx)).toEqual(ids)
  for (const id of ids) expect((await ledger.confirm(id, ACCOUNT)).status).toBe('confirmed')
  expect(await balances()).toEqual({ confirmed: 5_000_000, pending: 0, funded: 5_000_000 })
})

test('a payment an earlier build recorded by its transaction alone is still credited once, confirmed, moved and looked up', async () => {
  const tx = hex32()
  const legacy = transactionPaymentId(84532, tx)
  const auth = authorizationId(84532, TOKEN, PAYER, hex32())
  // As the earlier build's credit wrote it: the payment under <chainId>:<txHash>, no index of the transaction.
  await runScript(
    store,
    'creditPayment',
    [
      keys.payment(legacy),
      keys.authorization(auth),
      keys.paymentsInFlight,
      keys.paymentsUnconfirmed,
      keys.transactionPayments('elsewhere'),
      keys.account(ACCOUNT),
    ],
    {
      accountId: ACCOUNT,
      amount: 4_000_000,
      paymentId: legacy,
      authorizationId: auth,
      blockNumber: '10',
      payer: PAYER,
      table: ACCOUNT_TABLE,
    },
  )
  await store.del(keys.transactionPayments('elsewhere'))
  // A late credit of it under this build's id credits nothing; another authorization of the same transaction does.
  expect(await credit(auth, tx, 4_000_000)).toEqual({ status: 'already_credited', paymentId: legacy })
  const other = authorizationId(84532, TOKEN, PAYER, hex32())
  expect((await credit(other, tx, 1_000_000)).status).toBe('credited')
  expect(await balances()).toEqual({ confirmed: 0, pending: 5_000_000, funded: 5_000_000 })
  expect(await ledger.paymentsOf(84532, tx)).toEqual([legacy, paymentId(84532, tx, other)])
  // Moved to the transaction that did use its authorization: this build's id, found by either transaction.
  const newTx = hex32()
  const movedTo = paymentId(84532, newTx, auth)
  expect(await ledger.move(legacy, movedTo, 12n)).toEqual({ status: 'done' })
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'credited', paymentId: movedTo, tx: newTx })
  expect(await ledger.paymentsOf(84532, newTx)).toEqual([movedTo])
  expect((await ledger.paymentNow(legacy))?.id).toBe(movedTo)
  expect((await ledger.confirm(movedTo, ACCOUNT)).status).toBe('confirmed')
  expect(await balances()).toEqual({ confirmed: 4_000_000, pending: 1_000_000, funded: 5_000_000 })
})

test('a credit to a missing account or of a bad amount changes nothing', async () => {
  const before = await snapshotKeys(store, keys.prefix)
  const missing = await ledger.credit({
    accountId: 'nobody',
    amount: amount(1),
    chainId: 84532,
    transaction: hex32(),
    authorizationId: authorizationId(84532, TOKEN, PAYER, hex32()),
    blockNumber: 1n,
    payer: PAYER,
  })
  expect(missing).toEqual({ status: 'no_account' })
  await expect(credit(authorizationId(84532, TOKEN, PAYER, hex32()), hex32(), 0)).rejects.toThrow()
  await expect(credit(authorizationId(84532, TOKEN, PAYER, hex32()), hex32(), -5)).rejects.toThrow()
  expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
})

test('50 concurrent credits of one authorization under different hashes credit once', async () => {
  const auth = authorizationId(84532, TOKEN, PAYER, hex32())
  const results = await Promise.all(Array.from({ length: 50 }, () => credit(auth, hex32(), 3_000_000)))
  expect(results.filter((r) => r.status === 'credited')).toHaveLength(1)
  expect(await balances()).toEqual({ confirmed: 0, pending: 3_000_000, funded: 3_000_000 })
})

test('50 concurrent claims of one authorization: one wins', async () => {
  const auth = authorizationId(84532, TOKEN, PAYER, hex32())
  const claim = {
    authorizationId: auth,
    kind: 'signup' as const,
    accountId: undefined,
    payer: PAYER,
    amount: amount(1_000_000),
    fromBlock: 1n,
    validBefore: 1_900_000_000n,
  }
  const results = await Promise.all(Array.from({ length: 50 }, () => ledger.claim(claim)))
  expect(results.filter((r) => r.claimed)).toHaveLength(1)
})

test('confirm moves pending to confirmed once, even when 20 watchers race', async () => {
  const txs = [hex32(), hex32()]
  for (const tx of txs) await credit(authorizationId(84532, TOKEN, PAYER, hex32()), tx, 2_000_000)
  const ids = await Promise.all(txs.map((tx) => ledger.paymentsOf(84532, tx)))
  const [id, other] = ids.map((found) => found[0] as string) as [string, string]
  const results = await Promise.all(Array.from({ length: 20 }, () => ledger.confirm(id, ACCOUNT)))
  expect(results.filter((r) => r.status === 'confirmed')).toHaveLength(1)
  expect(await balances()).toEqual({ confirmed: 2_000_000, pending: 2_000_000, funded: 4_000_000 })
  expect(await ledger.unconfirmedUpTo(100n)).toEqual([other])
  expect(await ledger.confirm(id, 'someone-else')).toEqual({ status: 'nothing_to_do' })
  expect(await ledger.confirm(other, 'someone-else')).toEqual({ status: 'refused', code: -1 })
  expect((await ledger.confirm(other, ACCOUNT)).status).toBe('confirmed')
  expect(await balances()).toEqual({ confirmed: 4_000_000, pending: 0, funded: 4_000_000 })
})
