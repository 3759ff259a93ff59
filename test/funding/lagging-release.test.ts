// A load-balanced RPC whose nodes are at different heights: the reconciler's "unused and expired"
// is never read as "unused" from a lagging node and "expired" from a fresh one. A refill whose
// transfer is mined (its answer lost to a lagging node) must end credited, never released.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, type FrontRpc, serveRpc, startChainStack } from '../helpers/chain-stack.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, pay, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let chainStack: ChainStack<FrontRpc>
/** Receipts, transactions and `latest` eth_calls answered by a node stuck at this block. */
let lagBlock: bigint | undefined

/** Anvil, or a node stuck at lagBlock once it is set. */
const laggingRpc = (anvilUrl: string) =>
  serveRpc(async (request) => {
    const call = JSON.parse(await request.text()) as { method: string; id: number; params?: unknown[] }
    const missing = () => Response.json({ jsonrpc: '2.0', id: call.id, result: null })
    if (lagBlock !== undefined) {
      // The lagging node has not seen the block that mined the transfer.
      if (call.method === 'eth_getTransactionReceipt' || call.method === 'eth_getTransactionByHash')
        return missing()
      if (call.method === 'eth_call' && call.params?.[1] === 'latest')
        call.params[1] = `0x${lagBlock.toString(16)}`
    }
    const out = await fetch(anvilUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(call),
    })
    return new Response(await out.text(), { headers: { 'content-type': 'application/json' } })
  })

beforeAll(async () => {
  chainStack = await startChainStack({
    confirmations: 1,
    rpc: laggingRpc,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000', SVC_X402_RECEIPT_TIMEOUT_MS: '300' },
  })
  ;({ chain, stack } = chainStack)
  deps = stackWatchDeps(stack)
}, 60_000)

afterAll(() => chainStack.stop())

test('a mined refill read as unused by a lagging node and expired by a fresh one is credited, not released', async () => {
  const payer = await chain.newPayer(50_000_000n)
  const { response: signup } = await pay(`${stack.url}/v1/x402/signup`, { amountUsdc: '2.000000' }, payer)
  expect(signup.status).toBe(201)
  const accountId = signup.body.accountId as string
  const bearer = { authorization: `Bearer ${signup.body.apiKey}` }
  const refillUrl = `${stack.url}/v1/x402/refill`
  const requirements = await challenge(refillUrl, { amountUsdc: '10.000000' }, bearer)
  const header = await xPayment(payer, requirements)
  const payToBefore = await chain.balanceOf(chain.payTo)

  lagBlock = await chain.publicClient.getBlockNumber()
  try {
    const response = await post(refillUrl, { amountUsdc: '10.000000' }, { ...bearer, 'x-payment': header })
    // Mined (automine), but its receipt never reached the request: queued for the reconciler.
    expect(response.status).toBe(409)
    expect(response.body.error).toMatchObject({ code: 'payment_reconciling' })
    expect((await chain.balanceOf(chain.payTo)) - payToBefore).toBe(10_000_000n)

    // The chain's clock moves past validBefore; a pass reads the fresh head's time.
    await chain.testClient.increaseTime({ seconds: stack.config.funding!.maxTimeoutSeconds + 120 })
    await chain.testClient.mine({ blocks: 1 })
    await reconcilePayments(deps, 0)
  } finally {
    lagBlock = undefined
  }
  // Every node caught up: the transfer is there for anyone to see.
  await reconcilePayments(deps, 0)
  // The money moved; the account must hold it.
  expect(await stack.store.hget(stack.keys.account(accountId), 'funded')).toBe('12000000')
}, 90_000)
