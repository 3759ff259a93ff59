// A claim whose authorization the token says is used, by a transaction no search finds (mined
// before the search's range): it stays in flight, and each reconciler pass searches the logs for
// it again. Each search reads only the blocks the last one had not covered (less the reorg depth),
// so a claim that stays costs one log query per pass however long it stays, counted at the RPC.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Hex } from 'viem'
import { SEARCH_LAG_BLOCKS } from '../../src/funding/authorization-use.ts'
import { authorizationId, PaymentLedger } from '../../src/funding/ledger.ts'
import { CLOCK_SKEW_SECONDS } from '../../src/funding/payments.ts'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import { type LaggingRpc, startLaggingRpc } from '../helpers/lagging-rpc.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let rpc: LaggingRpc
let stack: TestStack
let deps: WatchDeps
let chainStack: ChainStack<LaggingRpc>
const CONFIRMATIONS = 2

beforeAll(async () => {
  // The stack's own watcher stays idle: the test runs the reconciler's passes itself.
  chainStack = await startChainStack({
    confirmations: CONFIRMATIONS,
    rpc: startLaggingRpc,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000' },
  })
  ;({ chain, stack, rpc } = chainStack)
  deps = stackWatchDeps(stack)
}, 60_000)

afterAll(() => chainStack.stop())

/** One reconciler pass: the log queries it made, as block ranges. */
async function pass(): Promise<[bigint, bigint][]> {
  const before = rpc.logRanges.length
  expect(await reconcilePayments(deps, 0)).toBe(0)
  return rpc.logRanges.slice(before)
}

test('a claim whose use no search finds: each pass searches only the blocks after the last one', async () => {
  const ledger = new PaymentLedger(stack.store, stack.keys)
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(
    payer,
    await challenge(`${stack.url}/v1/x402/signup`, { amountUsdc: '2.000000' }),
  )
  const { nonce, validBefore } = JSON.parse(Buffer.from(header, 'base64').toString()).payload
    .authorization as { nonce: Hex; validBefore: string }
  // Used long before the block the claim records: past the authorization's longest life in blocks.
  await chain.sendAuthorization(header)
  const lifetime = BigInt(stack.config.funding!.maxTimeoutSeconds + CLOCK_SKEW_SECONDS)
  await chain.testClient.mine({ blocks: Number(lifetime) + 40 })
  const fromBlock = await chain.publicClient.getBlockNumber()
  const id = authorizationId(chain.chainId, chain.usdc, payer.address, nonce)
  const claimed = await ledger.claim({
    authorizationId: id,
    kind: 'signup',
    accountId: undefined,
    payer: payer.address,
    amount: 2_000_000 as MicroUsdc,
    fromBlock,
    validBefore: BigInt(validBefore),
  })
  expect(claimed.claimed).toBe(true)

  // The first search: the whole range, one query (under the RPC's 2,000-block cap).
  const start = fromBlock - lifetime
  expect(await pass()).toEqual([[start, fromBlock]])

  // 1,900 blocks on: the new ones and the last CONFIRMATIONS + SEARCH_LAG_BLOCKS again, one query; the whole range
  // from `start` would take two.
  await chain.testClient.mine({ blocks: 1_900 })
  const head = fromBlock + 1_900n
  expect(await pass()).toEqual([[fromBlock - BigInt(CONFIRMATIONS) - SEARCH_LAG_BLOCKS + 1n, head]])
  // Nothing new: only the blocks a reorg may still change, or a node behind not have had.
  expect(await pass()).toEqual([[head - BigInt(CONFIRMATIONS) - SEARCH_LAG_BLOCKS + 1n, head]])
  // Still in flight: the chain says it is used, no search found by what.
  expect(await ledger.inFlight(id)).toBe(true)
}, 90_000)
