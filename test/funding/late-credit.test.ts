// A credit that arrives after its payment was taken back: a replica (a request, a reconciler
// pass) read the transaction's receipt before a reorg took it out, and writes the credit only
// after the watcher found the authorization expired unused and took the payment back. The
// take-back leaves the authorization marked `taken back` for as long as a credited one is kept,
// so the late credit is refused on either layout: nothing is credited, no record comes back, the
// audits (the chain's included) stay clean, and a replay of the header is answered 402.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { auditFundingOnChain } from '../../src/funding/audit.ts'
import { fundingChain } from '../../src/funding/chain.ts'
import { PaymentLedger } from '../../src/funding/ledger.ts'
import { confirmPayments, type WatchDeps } from '../../src/funding/watcher.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import type { Keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import { createAccount } from '../helpers/accounts.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { creditedBeforeReorg, stackWatchDeps } from '../helpers/funding-watch.ts'
import { type HeldApart, startHeldApart } from '../helpers/held-apart.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { authorizationOf, post } from '../helpers/x402.ts'

// A chain of each layout's own: the first one's clock is moved past the authorization's life.
let chain: TestChain

interface Market {
  url: string
  store: Store
  keys: Keyspace
  deps: WatchDeps
  /** A new account's id, for `wallet`. */
  account(wallet: string): Promise<string>
  audit(): Promise<unknown[]>
}

const env = () => ({ ...chain.env(2), SVC_X402_WATCH_INTERVAL_MS: '600000' })

const _nonceOf = (header: string) => authorizationOf(header).nonce

async function lateCreditRefused(market: Market): Promise<void> {
  const { store, keys, deps } = market
  const ledger = new PaymentLedger(store, keys)
  const balances = (accountId: string) =>
    store.hmget(keys.account(accountId), 'pending', 'confirmed', 'funded')
  const readChain = () =>
    auditFundingOnChain(store, keys, fundingChain(deps.config), chain.chainId, chain.usdc, chain.payTo)

  const payer = await chain.newPayer(10_000_000n)
  const accountId = await market.account(payer.address)
  const url = `${market.url}/v1/x402/signup`
  const before = await balances(accountId)
  // The receipt a replica holds from before the reorg, and the credit it wrote from it.
  const { header, auth, snapshot, credit, id } = await creditedBeforeReorg(
    ledger,
    chain,
    url,
    payer,
    accountId,
  )

  // The reorg took the transaction out, nobody sent the authorization again, and it expired.
  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.increaseTime({ seconds: deps.config.maxTimeoutSeconds + 120 })
  await chain.testClient.mine({ blocks: 5 })
  await confirmPayments(deps)
  expect(await ledger.payment(id)).toEqual({})
  expect(await balances(accountId)).toEqual(before)

  // Past the record retention the lookup's reversal is gone; what refuses the credit is not.
  await store.del(keys.paymentReversed(id))
  const unchanged = await snapshotKeys(store, keys.prefix)
  expect(await ledger.credit(credit)).toEqual({ status: 'taken_back', paymentId: id })
  expect(await ledger.credit(credit)).toEqual({ status: 'taken_back', paymentId: id })
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'taken back', paymentId: id })
  expect(await snapshotKeys(store, keys.prefix)).toEqual(unchanged)
  expect(await balances(accountId)).toEqual(before)
  expect(await market.audit()).toEqual([])
  expect((await readChain()).findings).toEqual([])

  // A replay of the header never claims it again: a 402, nothing written.
  const replay = await post(url, { amountUsdc: '3.000000' }, { 'x-payment': header })
  expect(replay.status).toBe(402)
  expect(replay.body.error).toStartWith('payment verification failed')
  expect(replay.body.accepts).toBeArray()
  expect(
    await ledger.claim({
      ...credit,
      kind: 'refill',
      validBefore: BigInt(authorizationOf(header).validBefore),
    }),
  ).toEqual({
    claimed: false,
    state: 'taken back',
    transaction: undefined,
  })
  await confirmPayments(deps)
  expect(await snapshotKeys(store, keys.prefix)).toEqual(unchanged)
  expect(await balances(accountId)).toEqual(before)
  expect(await market.audit()).toEqual([])
  expect((await readChain()).findings).toEqual([])
}

describe('one slot', () => {
  let stack: TestStack

  beforeAll(async () => {
    chain = await startChain()
    stack = await startStack({ env: env() })
  }, 60_000)

  afterAll(async () => {
    await stack.stop()
    await chain.stop()
  })

  test('a credit of a payment taken back is refused, whatever was kept of its reversal', async () => {
    await lateCreditRefused({
      url: stack.url,
      store: stack.store,
      keys: stack.keys,
      deps: stackWatchDeps(stack),
      account: async (wallet) => (await createAccount(stack, wallet)).accountId,
      audit: () => auditAll(stack.store, stack.keys),
    })
  }, 90_000)
})

describe('held apart', () => {
  let held: HeldApart

  beforeAll(async () => {
    chain = await startChain()
    held = await startHeldApart('late-credit', { env: env() })
  }, 60_000)

  afterAll(async () => {
    await held.stop()
    await chain.stop()
  })

  test('a credit of a payment taken back is refused, whatever was kept of its reversal', async () => {
    await lateCreditRefused({
      url: held.stack.url,
      store: held.store,
      keys: held.keys,
      deps: stackWatchDeps({ ...held.stack, store: held.store, keys: held.keys }),
      account: async (wallet) => (await held.accounts.create(wallet, 50)).account.id,
      audit: () => auditApart(held.store, held.keys.prefix),
    })
  }, 90_000)
})
