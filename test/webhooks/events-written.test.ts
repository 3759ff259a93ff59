// Events are written by the script that causes them, in the same call: a payment confirmed once
// writes funding.confirmed once (even when watchers race), a refused confirmation writes none,
// and an owner with no endpoint subscribed gets no stream entry at all.
import { afterAll, beforeEach, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { authorizationId, PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { createStore } from '../../src/redis/store.ts'
import { WebhookStore } from '../../src/webhooks/endpoints.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-events' })
afterAll(() => store.close())

const PAYER = '0x1111111111111111111111111111111111111111'
const TOKEN = '0x2222222222222222222222222222222222222222'
const hex32 = () => `0x${randomBytes(32).toString('hex')}`
let keys: Keyspace
let ledger: PaymentLedger

beforeEach(() => {
  keys = keyspace(testPrefix())
  ledger = new PaymentLedger(store, keys)
})

async function accountWithPayment(accountId: string, micros: number) {
  await store.hset(keys.account(accountId), {
    id: accountId,
    confirmed: 0,
    pending: 0,
    held: 0,
    spent: 0,
    funded: 0,
  })
  const tx = hex32()
  const auth = authorizationId(84532, TOKEN, PAYER, hex32())
  await ledger.credit({
    accountId,
    amount: micros as MicroUsdc,
    chainId: 84532,
    transaction: tx,
    authorizationId: auth,
    blockNumber: 10n,
    payer: PAYER,
  })
  return paymentId(84532, tx, auth)
}

const eventsOf = async (owner: string) =>
  (await store.xrange(keys.webhookEvents(owner), '-', '+')).map(([, fields]) => ({
    type: fields[1],
    data: JSON.parse(fields[5] as string),
  }))

test('funding.confirmed is written once by the confirmation, never by a refused one', async () => {
  const webhooks = new WebhookStore(store, keys, randomBytes(32), { allowLoopback: true })
  await webhooks.create('acct:acct-1', { url: 'http://127.0.0.1:9/hook', events: ['funding.confirmed'] })
  const id = await accountWithPayment('acct-1', 2_500_000)

  // Another account's confirmation of this payment is refused: nothing written, no one flagged.
  expect(await ledger.confirm(id, 'acct-2')).toEqual({ status: 'refused', code: -1 })
  expect(await eventsOf('acct:acct-1')).toEqual([])
  expect(await store.smembers(keys.webhookDue('acct:acct-1'))).toEqual([])

  const results = await Promise.all(Array.from({ length: 10 }, () => ledger.confirm(id, 'acct-1')))
  expect(results.filter((r) => r.status === 'confirmed')).toHaveLength(1)
  expect(await eventsOf('acct:acct-1')).toEqual([
    { type: 'funding.confirmed', data: { paymentId: id, amountUsdc: '2.500000', confirmedUsdc: '2.500000' } },
  ])
  // The same call flags the account for the delivery consumers.
  expect(await store.smembers(keys.webhookDue('acct:acct-1'))).toEqual(['acct:acct-1'])
})

test('an account with no endpoint subscribed gets no event stream written', async () => {
  const id = await accountWithPayment('acct-3', 1_000_000)
  expect((await ledger.confirm(id, 'acct-3')).status).toBe('confirmed')
  expect(await store.exists(keys.webhookEvents('acct:acct-3'))).toBe(0)
})
