// Claims that stay in flight for good (an authorization that may still be used until it expires,
// or one used by a transaction no search finds) sit at the front of the reconciler's list, oldest
// first. However many pile up there, a pass pages past them and still finishes the claims behind.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { authorizationId, PaymentLedger } from '../../src/funding/ledger.ts'
import { type ReconcileCursor, reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { randomWallet } from '../helpers/accounts.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { authorizationOf, challenge, fundedOf, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let chainStack: ChainStack

beforeAll(async () => {
  // The stack's own watcher stays idle: the test runs the reconciler's passes itself.
  chainStack = await startChainStack({ confirmations: 1, env: { SVC_X402_WATCH_INTERVAL_MS: '600000' } })
  ;({ chain, stack } = chainStack)
  deps = stackWatchDeps(stack)
}, 60_000)

afterAll(() => chainStack.stop())

test('more than a page of claims that stay in flight do not hold back a transfer behind them', async () => {
  const ledger = new PaymentLedger(stack.store, stack.keys)
  const head = await chain.publicClient.getBlockNumber()
  const validBefore = BigInt(Math.floor(Date.now() / 1000) + 3600)
  // Unused authorizations still valid for an hour: each claim waits for its expiry.
  for (let i = 0; i < 150; i++) {
    const claimed = await ledger.claim({
      authorizationId: authorizationId(
        chain.chainId,
        chain.usdc,
        randomWallet(),
        `0x${randomBytes(32).toString('hex')}`,
      ),
      kind: 'signup',
      accountId: undefined,
      payer: randomWallet(),
      amount: 1_000_000 as MicroUsdc,
      fromBlock: head,
      validBefore,
    })
    expect(claimed.claimed).toBe(true)
  }

  // Behind them, a claim whose transfer was mined by a transaction the gateway never recorded.
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(
    payer,
    await challenge(`${stack.url}/v1/x402/signup`, { amountUsdc: '2.000000' }),
  )
  const nonce = authorizationOf(header).nonce
  const id = authorizationId(chain.chainId, chain.usdc, payer.address, nonce)
  await ledger.claim({
    authorizationId: id,
    kind: 'signup',
    accountId: undefined,
    payer: payer.address,
    amount: 2_000_000 as MicroUsdc,
    fromBlock: head,
    validBefore,
  })
  expect((await stack.store.zrange(stack.keys.paymentsInFlight, 0, -1)).indexOf(id)).toBe(150)
  await chain.sendAuthorization(header)

  const cursor: ReconcileCursor = { offset: 0 }
  expect(await reconcilePayments(deps, 0, cursor)).toBe(1)
  expect(await fundedOf(stack, payer)).toBe(2_000_000n)
  expect(await stack.store.zcard(stack.keys.paymentsInFlight)).toBe(150)
  // The pass reached the end of the list: the next starts at the front again, and finds nothing new.
  expect(cursor.offset).toBe(0)
  expect(await reconcilePayments(deps, 0, cursor)).toBe(0)
  expect(await fundedOf(stack, payer)).toBe(2_000_000n)
}, 90_000)
