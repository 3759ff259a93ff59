// A remote facilitator's answer is a claim, checked against the chain before anything is credited:
// the transaction it names must be this authorization's (the token's AuthorizationUsed for the
// payer and nonce) and pay its amount to payTo. One that names another transaction of the same
// payer and amount, one that names a plain transfer while the authorization stays unused, one
// whose hash is not a hash: none is credited on its word, and a transfer that did happen is found
// on chain by the reconciler and credited once.

import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Hex } from 'viem'
import { PaymentLedger } from '../../src/funding/ledger.ts'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { startFacilitator, type TestFacilitator } from '../helpers/facilitator.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, pay, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let facilitator: TestFacilitator
let stack: TestStack
let deps: WatchDeps
let chainStack: ChainStack<undefined, TestFacilitator>

beforeAll(async () => {
  // The stack's own watcher stays idle: the tests run the reconciler's passes themselves.
  chainStack = await startChainStack({
    confirmations: 1,
    facilitator: startFacilitator,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000' },
  })
  ;({ chain, stack, facilitator } = chainStack)
  deps = stackWatchDeps(stack)
}, 60_000)

afterAll(() => chainStack.stop())

/** A payer with an account from a 2 USDC signup; its Bearer header and the signup's transaction. */
async function signedUp(micros = 50_000_000n) {
  const payer = await chain.newPayer(micros)
  const { response } = await pay(`${stack.url}/v1/x402/signup`, { amountUsdc: '2.000000' }, payer)
  expect(response.status).toBe(201)
  return {
    payer,
    accountId: response.body.accountId as string,
    bearer: { authorization: `Bearer ${response.body.apiKey}` },
    transaction: response.body.transaction as Hex,
  }
}

const funded = (accountId: string) => stack.store.hget(stack.keys.account(accountId), 'funded')
const refillUrl = () => `${stack.url}/v1/x402/refill`

async function refill(bearer: Record<string, string>, payer: Awaited<ReturnType<typeof signedUp>>['payer']) {
  const header = await xPayment(payer, await challenge(refillUrl(), { amountUsdc: '2.000000' }, bearer))
  try {
    return await post(refillUrl(), { amountUsdc: '2.000000' }, { ...bearer, 'x-payment': header })
  } finally {
    facilitator.lie = undefined
  }
}

test("settled, but answered with the payer's earlier transaction of the same amount: reconciling, then credited from the chain", async () => {
  const { payer, accountId, bearer, transaction: earlier } = await signedUp()
  const payToBefore = await chain.balanceOf(chain.payTo)
  facilitator.lie = { send: true, answer: (settled) => ({ ...settled, transaction: earlier }) }
  const response = await refill(bearer, payer)
  // The refill's transfer happened, in a transaction the answer did not name.
  expect((await chain.balanceOf(chain.payTo)) - payToBefore).toBe(2_000_000n)
  expect(response.status).toBe(409)
  expect(response.body.error).toMatchObject({ code: 'payment_reconciling', reconciling: true })
  expect(await funded(accountId)).toBe('2000000')

  await reconcilePayments(deps, 0)
  expect(await funded(accountId)).toBe('4000000')
  expect(await stack.store.zcard(stack.keys.paymentsInFlight)).toBe(0)
}, 60_000)

test('nothing sent, answered with a plain transfer of the amount: not credited, the authorization stays unused', async () => {
  const { payer, accountId, bearer } = await signedUp()
  // The payer's own transfer to payTo, outside any authorization.
  const { transaction: plain } = await chain.plainTransfer(payer, chain.payTo, 2_000_000n)

  const payToBefore = await chain.balanceOf(chain.payTo)
  facilitator.lie = {
    send: false,
    answer: () => ({ success: true, transaction: plain, network: 'base-sepolia', payer: payer.address }),
  }
  const response = await refill(bearer, payer)
  expect(response.status).toBe(402)
  expect(String(response.body.error)).toContain('payment settlement failed')
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore)
  expect(await funded(accountId)).toBe('2000000')
  // No payment of either id shape names the plain transfer.
  expect(await new PaymentLedger(stack.store, stack.keys).paymentsOf(chain.chainId, plain)).toEqual([])
}, 60_000)

test('settled, but answered with a hash that is not one: reconciling, then credited from the chain', async () => {
  const { payer, accountId, bearer } = await signedUp()
  facilitator.lie = { send: true, answer: (settled) => ({ ...settled, transaction: 'not-a-transaction' }) }
  const response = await refill(bearer, payer)
  expect(response.status).toBe(409)
  const error = response.body.error as Record<string, unknown>
  expect(error).toMatchObject({ code: 'payment_reconciling', reconciling: true })

  await reconcilePayments(deps, 0)
  expect(await funded(accountId)).toBe('4000000')
  // The answer's hash is not one: the payer is never told it as the transaction.
  expect(error.transaction).toBeUndefined()
}, 60_000)
