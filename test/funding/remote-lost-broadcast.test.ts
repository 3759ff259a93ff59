// A remote facilitator whose broadcast reaches the chain but whose node's reply is lost answers
// "failed" with no transaction. That proves nothing was NOT sent: the claim must stay for the
// reconciler, which credits the transfer once it is mined.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, type FrontRpc, serveRpc, startChainStack } from '../helpers/chain-stack.ts'
import { startFacilitator, type TestFacilitator } from '../helpers/facilitator.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, pay, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let chainStack: ChainStack<undefined, TestFacilitator>
let lossy: FrontRpc
/** The facilitator's node takes its broadcast and the answer is lost on the way back. */
let loseBroadcasts = false

/** The facilitator's node: anvil, each broadcast's answer lost while loseBroadcasts is set. */
const lossyRpc = (anvilUrl: string) =>
  serveRpc(async (request) => {
    const text = await request.text()
    const call = JSON.parse(text) as { method: string }
    const out = await fetch(anvilUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: text,
    })
    if (loseBroadcasts && call.method === 'eth_sendRawTransaction')
      return new Response('gateway timeout', { status: 504 })
    return new Response(await out.text(), { headers: { 'content-type': 'application/json' } })
  })

beforeAll(async () => {
  // The facilitator reaches the chain through the lossy node; the gateway reads it directly.
  chainStack = await startChainStack({
    confirmations: 1,
    facilitator: (chain) => {
      lossy = lossyRpc(chain.rpcUrl)
      return startFacilitator({ ...chain, rpcUrl: lossy.url })
    },
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000' },
  })
  ;({ chain, stack } = chainStack)
  deps = stackWatchDeps(stack)
}, 60_000)

afterAll(async () => {
  await chainStack.stop()
  lossy.stop()
})

test('a facilitator that lost its broadcast reply: the transfer, once mined, is credited', async () => {
  const payer = await chain.newPayer(50_000_000n)
  const { response: signup } = await pay(`${stack.url}/v1/x402/signup`, { amountUsdc: '2.000000' }, payer)
  expect(signup.status).toBe(201)
  const accountId = signup.body.accountId as string
  const bearer = { authorization: `Bearer ${signup.body.apiKey}` }
  const refillUrl = `${stack.url}/v1/x402/refill`
  const header = await xPayment(payer, await challenge(refillUrl, { amountUsdc: '10.000000' }, bearer))
  const payToBefore = await chain.balanceOf(chain.payTo)

  // A real chain does not mine at once: the transaction waits in the pool.
  await chain.testClient.setAutomine(false)
  loseBroadcasts = true
  let response: Awaited<ReturnType<typeof post>>
  try {
    response = await post(refillUrl, { amountUsdc: '10.000000' }, { ...bearer, 'x-payment': header })
  } finally {
    loseBroadcasts = false
  }
  await chain.testClient.mine({ blocks: 1 })
  await chain.testClient.setAutomine(true)
  // The transfer is on chain.
  expect((await chain.balanceOf(chain.payTo)) - payToBefore).toBe(10_000_000n)
  // Unknown whether money moved: not a fresh 402 inviting a second signature.
  expect(response.status).toBe(502)
  expect(response.body.error).toMatchObject({ code: 'settle_failed' })

  await reconcilePayments(deps, 0)
  expect(await stack.store.hget(stack.keys.account(accountId), 'funded')).toBe('12000000')
}, 90_000)
