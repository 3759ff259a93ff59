// The funding watcher's dependencies for a test stack, as a replica builds them: a test drives the
// confirmations and the reconciler itself (its interval set far off) and asserts on what they did.
import { expect } from 'bun:test'
import type { PrivateKeyAccount } from 'viem'
import { AccountStore } from '../../src/accounts/accounts.ts'
import { accountForPayer } from '../../src/funding/accounts.ts'
import { auditFundingOnChain } from '../../src/funding/audit.ts'
import { fundingChain } from '../../src/funding/chain.ts'
import { createFunding, watchDeps } from '../../src/funding/index.ts'
import { authorizationId, type PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import { createLogger } from '../../src/logger.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import type { TestChain } from './chain.ts'
import type { TestStack } from './stack.ts'
import { authorizationOf, challenge, xPayment } from './x402.ts'

export function stackWatchDeps(stack: TestStack): WatchDeps {
  const logger = createLogger('silent')
  const funding = createFunding(
    stack.config.funding!,
    stack.store,
    stack.keys,
    logger,
    stack.config.records.recordRetentionDays * 86_400_000,
  )
  const accounts = new AccountStore(stack.store, stack.keys)
  return watchDeps(funding, logger, async (payer) => {
    return (await accountForPayer(accounts, payer, stack.config.defaultMaxPriceCents)).accountId
  })
}

/** The one payment a transaction was credited with, by the ledger's lookup by transaction. */
export async function onlyPaymentOf(ledger: PaymentLedger, chainId: number, transaction: string) {
  const ids = await ledger.paymentsOf(chainId, transaction)
  expect(ids).toHaveLength(1)
  return ids[0]!
}

/** The on-chain funding audit of a test stack's payments against its local chain. */
export const auditStackOnChain = (stack: TestStack, chain: TestChain) =>
  auditFundingOnChain(
    stack.store,
    stack.keys,
    fundingChain(stack.config.funding!),
    chain.chainId,
    chain.usdc,
    chain.payTo,
  )

/**
 * A refill of 3 USDC credited from a receipt a reorg can take away: the payer's authorization
 * claimed as the gateway's request claims it, the chain's snapshot from before its transaction,
 * the transaction sent, and the credit a replica writes from its receipt.
 */
export async function creditedBeforeReorg(
  ledger: PaymentLedger,
  chain: TestChain,
  signupUrl: string,
  payer: PrivateKeyAccount,
  accountId: string,
) {
  const header = await xPayment(payer, await challenge(signupUrl, { amountUsdc: '3.000000' }))
  const { validBefore, nonce } = authorizationOf(header)
  const auth = authorizationId(chain.chainId, chain.usdc, payer.address, nonce)
  const amount = 3_000_000 as MicroUsdc
  expect(
    await ledger.claim({
      authorizationId: auth,
      kind: 'refill',
      accountId,
      payer: payer.address,
      amount,
      fromBlock: await chain.publicClient.getBlockNumber(),
      validBefore: BigInt(validBefore),
    }),
  ).toEqual({ claimed: true })
  const snapshot = await chain.testClient.snapshot()
  const sent = await chain.sendAuthorization(header)
  const credit = {
    accountId,
    amount,
    chainId: chain.chainId,
    transaction: sent.transaction,
    authorizationId: auth,
    blockNumber: sent.blockNumber,
    payer: payer.address,
  }
  expect((await ledger.credit(credit)).status).toBe('credited')
  return { header, auth, snapshot, sent, credit, id: paymentId(chain.chainId, sent.transaction, auth) }
}
