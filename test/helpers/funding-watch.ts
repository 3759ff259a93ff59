// The funding watcher's dependencies for a test stack, as a replica builds them: a test drives the
// confirmations and the reconciler itself (its interval set far off) and asserts on what they did.
import { AccountStore } from '../../src/accounts/accounts.ts'
import { accountForPayer } from '../../src/funding/accounts.ts'
import { auditFundingOnChain } from '../../src/funding/audit.ts'
import { fundingChain } from '../../src/funding/chain.ts'
import { createFunding, watchDeps } from '../../src/funding/index.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import { createLogger } from '../../src/logger.ts'
import type { TestChain } from './chain.ts'
import type { TestStack } from './stack.ts'

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
