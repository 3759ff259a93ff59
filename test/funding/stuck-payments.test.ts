// Pending payments that stay on the confirmations watcher's list past the reorg bound (a
// transaction the chain no longer holds, whose authorization does not yet say where the money
// went) cost a read each, every pass. However many pile up at the front, a pass reads at most
// PASS_PAGES pages of them, as the reconciler's do, and the next resumes where it stopped: the
// payment behind them confirms on a later pass. Counted at the RPC by receipt reads.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { PaymentLedger } from '../../src/funding/ledger.ts'
import { PASS_PAGE, PASS_PAGES, type ReconcileCursor } from '../../src/funding/reconciler.ts'
import { confirmPayments, type WatchDeps } from '../../src/funding/watcher.ts'
import { createAccount, settledPayment } from '../helpers/accounts.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { onlyPaymentOf, stackWatchDeps } from '../helpers/funding-watch.ts'
import { type LaggingRpc, startLaggingRpc } from '../helpers/lagging-rpc.ts'
import type { TestStack } from '../helpers/stack.ts'
import { pay } from '../helpers/x402.ts'

let chain: TestChain
let rpc: LaggingRpc
let stack: TestStack
let deps: WatchDeps
let chainStack: ChainStack<LaggingRpc>

beforeAll(async () => {
  // The stack's own watcher stays idle: the test runs the confirmations' passes itself.
  chainStack = await startChainStack({
    confirmations: 2,
    rpc: startLaggingRpc,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000' },
  })
  ;({ chain, stack, rpc } = chainStack)
  deps = stackWatchDeps(stack)
}, 60_000)

afterAll(() => chainStack.stop())

const receiptReads = () => rpc.calls.eth_getTransactionReceipt ?? 0

test('more payments stuck past the reorg bound than a pass reads do not hold back one behind them', async () => {
  const ledger = new PaymentLedger(stack.store, stack.keys)
  // Credited at block 100 from transactions the chain never held, past the reorg bound from here.
  await chain.testClient.mine({ blocks: 200 })
  const { accountId } = await createAccount(stack)
  const stuck = PASS_PAGE * PASS_PAGES + 1
  for (let i = 0; i < stuck; i++) {
    expect((await ledger.credit(settledPayment(accountId, 1))).status).toBe('credited')
  }
  // Behind them, a payment whose transaction is on chain at depth.
  const payer = await chain.newPayer(10_000_000n)
  const { response } = await pay(`${stack.url}/v1/x402/signup`, { amountUsdc: '2.000000' }, payer)
  expect(response.status).toBe(201)
  const id = await onlyPaymentOf(ledger, chain.chainId, response.body.transaction as string)
  await chain.testClient.mine({ blocks: 2 })

  // One pass: PASS_PAGES pages, a receipt read each, and it stops there.
  const cursor: ReconcileCursor = { offset: 0 }
  let before = receiptReads()
  expect(await confirmPayments(deps, cursor)).toBe(0)
  expect(receiptReads() - before).toBe(PASS_PAGE * PASS_PAGES)
  expect(cursor.offset).toBe(PASS_PAGE * PASS_PAGES)
  expect((await ledger.payment(id)).state).toBe('pending')

  // The next resumes there: the last stuck one, then the payment behind, confirmed; back to the front.
  before = receiptReads()
  expect(await confirmPayments(deps, cursor)).toBe(1)
  expect(receiptReads() - before).toBe(2)
  expect(cursor.offset).toBe(0)
  expect((await ledger.payment(id)).state).toBe('confirmed')
  expect(await stack.store.zcard(stack.keys.paymentsUnconfirmed)).toBe(stuck)
}, 120_000)
