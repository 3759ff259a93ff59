// A payment's claim against an RPC that lags and loses answers: a broadcast whose reply is lost, a
// node that does not hold the pending pool, a verification slower than the reconciler's grace.
// Whatever a node says or does not say, a payment that moves on chain ends credited once, and a
// claim is let go only when the chain shows its authorization can no longer move money: unused,
// and past its validBefore by the chain's own clock.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, type FrontRpc, serveRpc, startChainStack } from '../helpers/chain-stack.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { challenge, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let chainStack: ChainStack<FrontRpc>
/** A broadcast reaches the node but its answer is lost, and a node asked after has not seen it. */
let loseBroadcasts = false
/** A node that forwards transactions on and keeps no pool: a pending one is unknown to it. */
let hidePending = false
/** Each eth_call answered this many ms late (an RPC under load). */
let slowCallsMs = 0
/** The chain's head cannot be read (a node down for that call). */
let failHead = false

/** Anvil, behind a node that misbehaves as the flags above say. */
const misbehavingRpc = (anvilUrl: string) =>
  serveRpc(async (request) => {
    const text = await request.text()
    const call = JSON.parse(text) as { method: string; id: number }
    const upstream = () =>
      fetch(anvilUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text })
    if (slowCallsMs && call.method === 'eth_call') await Bun.sleep(slowCallsMs)
    if (failHead && call.method === 'eth_blockNumber') return new Response('bad gateway', { status: 502 })
    if (loseBroadcasts && call.method === 'eth_sendRawTransaction') {
      await upstream()
      return new Response('gateway timeout', { status: 504 })
    }
    const missing = Response.json({ jsonrpc: '2.0', id: call.id, result: null })
    if (loseBroadcasts && call.method === 'eth_getTransactionByHash') return missing
    const out = await (await upstream()).text()
    if (hidePending && call.method === 'eth_getTransactionByHash') {
      const tx = (JSON.parse(out) as { result: { blockNumber: string | null } | null }).result
      if (tx && tx.blockNumber === null) return missing
    }
    return new Response(out, { headers: { 'content-type': 'application/json' } })
  })

beforeAll(async () => {
  chainStack = await startChainStack({
    confirmations: 1,
    rpc: misbehavingRpc,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000', SVC_X402_RECEIPT_TIMEOUT_MS: '300' },
  })
  ;({ chain, stack } = chainStack)
  deps = stackWatchDeps(stack)
}, 60_000)

afterAll(() => chainStack.stop())

const signupUrl = () => `${stack.url}/v1/x402/signup`

async function signup(usdc: string) {
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(payer, await challenge(signupUrl(), { amountUsdc: usdc }))
  return { payer, header, payToBefore: await chain.balanceOf(chain.payTo) }
}

async function fundedOf(payer: { address: string }): Promise<string | null> {
  const accountId = await stack.store.hget(stack.keys.wallets, payer.address.toLowerCase())
  return accountId ? await stack.store.hget(stack.keys.account(accountId), 'funded') : null
}

const inFlight = () => stack.store.zrange(stack.keys.paymentsInFlight, 0, -1)

test('a broadcast whose answer is lost is reconciling, never refused: once mined it is credited, once', async () => {
  const { payer, header, payToBefore } = await signup('5.000000')
  await chain.testClient.setAutomine(false)
  loseBroadcasts = true
  let response: Awaited<ReturnType<typeof post>>
  try {
    response = await post(signupUrl(), { amountUsdc: '5.000000' }, { 'x-payment': header })
  } finally {
    loseBroadcasts = false
  }
  expect(response.status).toBe(409)
  expect(response.body.error).toMatchObject({ code: 'payment_reconciling', reconciling: true })
  expect(response.body.accepts).toBeUndefined()
  const [id] = await inFlight()
  expect(await stack.store.hget(stack.keys.authorization(id!), 'state')).toBe('sent')

  await chain.testClient.mine({ blocks: 1 })
  await chain.testClient.setAutomine(true)
  expect((await chain.balanceOf(chain.payTo)) - payToBefore).toBe(5_000_000n)
  expect(await reconcilePayments(deps, 0)).toBe(1)
  expect(await fundedOf(payer)).toBe('5000000')
  expect(await reconcilePayments(deps, 0)).toBe(0)
  expect(await fundedOf(payer)).toBe('5000000')
}, 90_000)

test('a transaction a node does not hold, long after its claim: kept until mined, then credited', async () => {
  const { payer, header, payToBefore } = await signup('6.000000')
  await chain.testClient.setAutomine(false)
  try {
    const response = await post(signupUrl(), { amountUsdc: '6.000000' }, { 'x-payment': header })
    expect(response.status).toBe(409)
    const [id] = await inFlight()
    // Long past any grace, asked of a node without the pool: "no such transaction" proves nothing.
    hidePending = true
    expect(await reconcilePayments(deps, 0)).toBe(0)
    hidePending = false
    expect(await inFlight()).toEqual([id!])
    await chain.testClient.mine({ blocks: 1 })
  } finally {
    hidePending = false
    await chain.testClient.setAutomine(true)
  }
  expect((await chain.balanceOf(chain.payTo)) - payToBefore).toBe(6_000_000n)
  expect(await reconcilePayments(deps, 0)).toBe(1)
  expect(await fundedOf(payer)).toBe('6000000')
}, 90_000)

test('a reconciler pass during a slow verification leaves the claim the request goes on to settle', async () => {
  const { payer, header, payToBefore } = await signup('7.000000')
  slowCallsMs = 400
  try {
    const answer = post(signupUrl(), { amountUsdc: '7.000000' }, { 'x-payment': header })
    await until(async () => (await inFlight()).length === 1)
    // Another replica's pass while the request still verifies: the authorization is unused, and
    // it is not expired, so the claim stays for the request to settle and credit.
    await reconcilePayments(deps, 0)
    expect((await answer).status).toBe(201)
  } finally {
    slowCallsMs = 0
  }
  expect((await chain.balanceOf(chain.payTo)) - payToBefore).toBe(7_000_000n)
  expect(await fundedOf(payer)).toBe('7000000')
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
}, 90_000)

test('a chain head that cannot be read before settling: 502, nothing sent, the payer may retry', async () => {
  const { payer, header, payToBefore } = await signup('4.000000')
  failHead = true
  let response: Awaited<ReturnType<typeof post>>
  try {
    response = await post(signupUrl(), { amountUsdc: '4.000000' }, { 'x-payment': header })
  } finally {
    failHead = false
  }
  expect(response.status).toBe(502)
  expect(response.body.error).toMatchObject({ code: 'verify_unavailable' })
  expect(await inFlight()).toEqual([])
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore)
  const retried = await post(signupUrl(), { amountUsdc: '4.000000' }, { 'x-payment': header })
  expect(retried.status).toBe(201)
  expect(await fundedOf(payer)).toBe('4000000')
}, 90_000)

// Last: it moves the chain's clock past every authorization signed before.
test('a claim whose transaction is gone is released only once its authorization expires unused', async () => {
  const { payer, header, payToBefore } = await signup('8.000000')
  await chain.testClient.setAutomine(false)
  let tx: `0x${string}`
  try {
    const response = await post(signupUrl(), { amountUsdc: '8.000000' }, { 'x-payment': header })
    expect(response.status).toBe(409)
    const [id] = await inFlight()
    tx = (await stack.store.hget(stack.keys.authorization(id!), 'tx')) as `0x${string}`
    // Dropped from the pool: nothing will mine it, but nothing on chain says so yet.
    await chain.testClient.dropTransaction({ hash: tx })
    await chain.testClient.mine({ blocks: 1 })
    expect(await reconcilePayments(deps, 0)).toBe(0)
    expect(await inFlight()).toEqual([id!])
    // The chain's time past validBefore: the token refuses the authorization for good.
    await chain.testClient.increaseTime({ seconds: stack.config.funding!.maxTimeoutSeconds + 120 })
    await chain.testClient.mine({ blocks: 1 })
    expect(await reconcilePayments(deps, 0)).toBe(0)
    expect(await inFlight()).toEqual([])
  } finally {
    await chain.testClient.setAutomine(true)
  }
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore)
  expect(await fundedOf(payer)).toBeNull()
}, 90_000)
