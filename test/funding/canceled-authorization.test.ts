// A payer who cancels the authorization they presented (EIP-3009 cancelAuthorization) before the
// relayer settles it: the token reads it "used", but no money moved. The request is answered a
// payment challenge that says so, never a 409 that says it settled; the reconciler releases the
// claim once the cancellation is confirmed, crediting nothing and asking no operator; the record
// stays marked canceled, so a replay and a stale credit of a lost fork are refused (a replay before
// the cancellation is confirmed is challenged alike, the claim left waiting); the audits,
// the chain's included, find nothing. Both ways the relayer meets the cancellation: its gas
// estimate refuses the transfer (nothing sent), or the cancellation is mined just before the sent
// transfer, which reverts.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import pino from 'pino'
import { auditAll } from '../../src/cli/audit.ts'
import { auditFundingOnChain } from '../../src/funding/audit.ts'
import { fundingChain } from '../../src/funding/chain.ts'
import { authorizationId, PaymentLedger } from '../../src/funding/ledger.ts'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { createAccount } from '../helpers/accounts.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, type FrontRpc, serveRpc, startChainStack } from '../helpers/chain-stack.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { authorizationOf, challenge, post, xPayment } from '../helpers/x402.ts'

type CancelAt = 'estimate' | 'send'

let chain: TestChain
let stack: TestStack
let chainStack: ChainStack<FrontRpc>
/** The relayer's next call of this kind is preceded by the payer's cancellation, mined first. */
let armed: { at: CancelAt; cancel: () => Promise<unknown> } | null = null

// What the relayer's send asks first: a gas estimate (or a node's fill) that runs the call.
const ESTIMATES = new Set(['eth_estimateGas', 'eth_fillTransaction'])

/** Anvil, each call runs the armed cancellation first when it is of the armed kind. */
const cancellingRpc = (anvilUrl: string) =>
  serveRpc(async (request) => {
    const text = await request.text()
    const call = JSON.parse(text) as { method: string }
    const at =
      call.method === 'eth_sendRawTransaction' ? 'send' : ESTIMATES.has(call.method) ? 'estimate' : null
    if (armed && armed.at === at) {
      const { cancel } = armed
      armed = null
      await cancel()
    }
    const answer = await fetch(anvilUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: text,
    })
    return new Response(await answer.text(), { headers: { 'content-type': 'application/json' } })
  })

beforeAll(async () => {
  chainStack = await startChainStack({
    confirmations: 2,
    rpc: cancellingRpc,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000' },
  })
  ;({ chain, stack } = chainStack)
}, 60_000)

afterAll(() => chainStack.stop())

/** The watcher's dependencies, with what its logger wrote at warn and above. */
function watching(): { deps: WatchDeps; logged: { level: number; msg: string }[] } {
  const logged: { level: number; msg: string }[] = []
  const logger = pino({ level: 'warn' }, { write: (line: string) => logged.push(JSON.parse(line)) })
  return { deps: { ...stackWatchDeps(stack), logger }, logged }
}

const REPLAYED =
  'payment verification failed: the authorization was canceled by the payer; no money moved, sign a new authorization'

async function canceledBeforeSettling(at: CancelAt): Promise<void> {
  const { store, keys } = stack
  const ledger = new PaymentLedger(store, keys)
  const { deps, logged } = watching()
  const url = `${stack.url}/v1/x402/signup`
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(payer, await challenge(url, { amountUsdc: '3.000000' }))
  const nonce = authorizationOf(header).nonce
  const auth = authorizationId(chain.chainId, chain.usdc, payer.address, nonce)
  const payToBefore = await chain.balanceOf(chain.payTo)

  armed = { at, cancel: () => chain.cancelAuthorization(payer, nonce) }
  const response = await post(url, { amountUsdc: '3.000000' }, { 'x-payment': header })
  expect(armed).toBeNull()
  expect(response.status).toBe(402)
  expect(response.body.error).toBe(
    'payment settlement failed: the authorization was canceled by the payer; no money moved, sign a new authorization',
  )
  expect(response.body.accepts).toBeArray()
  expect(await chain.balanceOf(payer.address)).toBe(10_000_000n)
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore)

  // Until the cancellation is confirmed a reorg could take it out: the claim waits.
  expect(await store.zrange(keys.paymentsInFlight, 0, -1)).toEqual([auth])
  // Meanwhile a replay of the header is answered as the request was, and as it is once the
  // cancellation is confirmed: no money moved, sign again; never a 409 that it is being settled.
  const waiting = await snapshotKeys(store, keys.prefix)
  const early = await post(url, { amountUsdc: '3.000000' }, { 'x-payment': header })
  expect([early.status, early.body.error]).toEqual([402, REPLAYED])
  expect(early.body.accepts).toBeArray()
  expect(await snapshotKeys(store, keys.prefix)).toEqual(waiting)
  if (at === 'estimate') {
    expect(await reconcilePayments(deps, 0)).toBe(0)
    expect(await store.zrange(keys.paymentsInFlight, 0, -1)).toEqual([auth])
  }
  await chain.testClient.mine({ blocks: 2 })
  expect(await reconcilePayments(deps, 0)).toBe(0)
  expect(await store.zrange(keys.paymentsInFlight, 0, -1)).toEqual([])
  expect(await ledger.authorization(auth)).toMatchObject({ state: 'canceled' })
  expect(await store.pttl(keys.authorization(auth))).toBeGreaterThan(0)
  expect(logged).toEqual([])
  expect(await store.hget(keys.wallets, payer.address.toLowerCase())).toBeNull()

  // A replay of the header is challenged for the same reason; a stale credit naming the
  // authorization (a receipt of a lost fork) moves nothing, to the payer's account made since.
  const { accountId } = await createAccount(stack, payer.address)
  const unchanged = await snapshotKeys(store, keys.prefix)
  const replay = await post(url, { amountUsdc: '3.000000' }, { 'x-payment': header })
  expect(replay.status).toBe(402)
  expect(replay.body.error).toBe(REPLAYED)
  expect(replay.body.accepts).toBeArray()
  const stale = {
    accountId,
    amount: 3_000_000 as MicroUsdc,
    chainId: chain.chainId,
    transaction: `0x${'ab'.repeat(32)}`,
    authorizationId: auth,
    blockNumber: await chain.publicClient.getBlockNumber(),
    payer: payer.address,
  }
  expect(await ledger.credit(stale)).toEqual({ status: 'released', state: 'canceled' })
  expect(await snapshotKeys(store, keys.prefix)).toEqual(unchanged)

  expect(await auditAll(store, keys)).toEqual([])
  const onChain = await auditFundingOnChain(
    store,
    keys,
    fundingChain(deps.config),
    chain.chainId,
    chain.usdc,
    chain.payTo,
  )
  expect(onChain.findings).toEqual([])
}

describe('an authorization the payer canceled before it settled', () => {
  test('refused at the gas estimate: a challenge, the claim released once confirmed, nothing credited', async () => {
    await canceledBeforeSettling('estimate')
  }, 90_000)

  test('mined before the sent transfer, which reverts: the same', async () => {
    await canceledBeforeSettling('send')
  }, 90_000)
})
