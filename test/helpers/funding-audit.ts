// A funding market brought to rest and audited: nothing in flight or left to confirm, then the
// audit of Redis and its read back from the chain.
import { expect } from 'bun:test'
import { auditFunding, auditFundingOnChain } from '../../src/funding/audit.ts'
import { fundingChain } from '../../src/funding/chain.ts'
import type { TestChain } from './chain.ts'
import type { TestStack } from './stack.ts'
import { until } from './wait.ts'

/** Waits until no claim is in flight and no payment unconfirmed: no watcher moves what is audited. */
export async function untilFundingAtRest(stack: TestStack): Promise<void> {
  await until(
    async () =>
      (await stack.store.zcard(stack.keys.paymentsInFlight)) === 0 &&
      (await stack.store.zcard(stack.keys.paymentsUnconfirmed)) === 0,
    50,
  )
}

/** The funding audit finds nothing, on Redis and on the chain, which reads back `checked` payments. */
export async function expectFundingAuditClean(stack: TestStack, chain: TestChain, checked: number) {
  expect(await auditFunding(stack.store, stack.keys)).toEqual([])
  const config = stack.config.funding!
  const onChain = await auditFundingOnChain(
    stack.store,
    stack.keys,
    fundingChain(config),
    chain.chainId,
    config.usdcAddress,
    config.payTo,
  )
  expect(onChain.findings).toEqual([])
  expect(onChain.checked).toBe(checked)
}
