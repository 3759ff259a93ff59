// Credits the chain takes back. A payment is credited to pending when its transfer is mined and
// moves to confirmed only while its receipt is still on chain at the configured depth: one a reorg
// removed stays pending, never spendable. However many such payments wait, the confirmations
// watcher still reaches those behind them.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import type { Hex } from 'viem'
import { authorizationId, PaymentLedger } from '../../src/funding/ledger.ts'
import { confirmPayments, type WatchDeps } from '../../src/funding/watcher.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { onlyPaymentOf, stackWatchDeps } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { pay } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let chainStack: ChainStack

beforeAll(async () => {
  // The stack's own watcher stays idle: the tests run its passes themselves.
  chainStack = await startChainStack({ confirmations: 2, env: { SVC_X402_WATCH_INTERVAL_MS: '600000' } })
  ;({ chain, stack } = chainStack)
  deps = stackWatchDeps(stack)
}, 60_000)

afterAll(() => chainStack.stop())

async function signup() {
  const payer = await chain.newPayer(10_000_000n)
  const { response } = await pay(`${stack.url}/v1/x402/signup`, { amountUsdc: '5.000000' }, payer)
  expect(response.status).toBe(201)
  return { accountId: response.body.accountId as string, transaction: response.body.transaction as Hex }
}

const balances = (accountId: string) =>
  stack.store.hmget(stack.keys.account(accountId), 'pending', 'confirmed', 'funded')

test('pending payments a reorg removed, more than a page of them, do not hold back those behind', async () => {
  const { accountId, transaction } = await signup()
  // Credited at block 1, ahead of the signup's: transactions no longer on chain.
  const ledger = new PaymentLedger(stack.store, stack.keys)
  for (let i = 0; i < 150; i++) {
    const credited = await ledger.credit({
      accountId,
      amount: 1_000_000 as MicroUsdc,
      chainId: chain.chainId,
      transaction: `0x${randomBytes(32).toString('hex')}`,
      authorizationId: authorizationId(
        chain.chainId,
        chain.usdc,
        chain.payTo,
        `0x${randomBytes(32).toString('hex')}`,
      ),
      blockNumber: 1n,
      payer: chain.payTo,
    })
    expect(credited.status).toBe('credited')
  }
  await chain.testClient.mine({ blocks: 2 })

  expect(await confirmPayments(deps)).toBe(1)
  const payment = await ledger.payment(await onlyPaymentOf(ledger, chain.chainId, transaction))
  expect(payment.state).toBe('confirmed')
  expect(await balances(accountId)).toEqual(['150000000', '5000000', '155000000'])
}, 60_000)

// Last in the file: the reverted chain leaves the relayer's recorded nonce ahead of it.
test('a credited payment whose transaction a reorg removed stays pending past the depth', async () => {
  const snapshot = await chain.testClient.snapshot()
  const { accountId, transaction } = await signup()
  expect(await balances(accountId)).toEqual(['5000000', '0', '5000000'])
  await chain.testClient.revert({ id: snapshot })
  expect(await chain.publicClient.getTransactionReceipt({ hash: transaction }).catch(() => null)).toBeNull()
  await chain.testClient.mine({ blocks: 5 })

  await confirmPayments(deps)
  expect(await balances(accountId)).toEqual(['5000000', '0', '5000000'])
  const id = await onlyPaymentOf(new PaymentLedger(stack.store, stack.keys), chain.chainId, transaction)
  const payment = await stack.store.hget(stack.keys.payment(id), 'state')
  expect(payment).toBe('pending')
}, 60_000)
