// An authorization whose copy was mined before the payment came, read through a load-balanced RPC
// whose `eth_call`s are answered by a node that has not seen that block. The check before settling
// and the one after the relayer's refusal both read "unused"; only the relayer's gas estimate, run
// on a node that has the block, says the authorization is used. The money is at SVC_PAY_TO: the
// claim must stay for the reconciler (never released for the payer to sign again), and once the
// RPC catches up the transfer is credited once.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createWalletClient, http, parseAbi } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, type FrontRpc, serveRpc, startChainStack } from '../helpers/chain-stack.ts'
import { stackWatchDeps } from '../helpers/funding-watch.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, post, xPayment } from '../helpers/x402.ts'

const transferAbi = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
])

let chain: TestChain
let stack: TestStack
let deps: WatchDeps
let chainStack: ChainStack<FrontRpc>
/** The block the lagging node is at: every `eth_call` at the head is answered as of it. */
let laggingAt: bigint | null = null

/** Anvil, its `eth_call`s at the head answered as of laggingAt once it is set. */
const laggingRpc = (anvilUrl: string) =>
  serveRpc(async (request) => {
    const text = await request.text()
    const call = JSON.parse(text) as { method: string; id: number; params?: unknown[] }
    const params = call.params ?? []
    // Reads at a block number pass: a node answers for the blocks it has.
    const atHead = params[1] === undefined || params[1] === 'latest' || params[1] === 'pending'
    const body =
      laggingAt !== null && call.method === 'eth_call' && atHead
        ? JSON.stringify({ ...call, params: [params[0], `0x${laggingAt.toString(16)}`] })
        : text
    const answer = await fetch(anvilUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    })
    return new Response(await answer.text(), { headers: { 'content-type': 'application/json' } })
  })

beforeAll(async () => {
  chainStack = await startChainStack({
    confirmations: 1,
    rpc: laggingRpc,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000' },
  })
  ;({ chain, stack } = chainStack)
  deps = stackWatchDeps(stack)
}, 30_000)
afterAll(() => chainStack.stop())

test('a copy mined before the claim, unseen by a lagging read: the claim stays, the transfer is credited once', async () => {
  const url = `${stack.url}/v1/x402/signup`
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(payer, await challenge(url, { amountUsdc: '3.000000' }))
  const { payload } = JSON.parse(Buffer.from(header, 'base64').toString()) as {
    payload: {
      signature: `0x${string}`
      authorization: Record<'from' | 'to' | 'value' | 'validAfter' | 'validBefore' | 'nonce', string>
    }
  }
  const a = payload.authorization
  // Whoever holds a copy of the header can send it, before the gateway has seen it.
  const copier = privateKeyToAccount(generatePrivateKey())
  await chain.testClient.setBalance({ address: copier.address, value: 10n ** 18n })
  const wallet = createWalletClient({
    account: copier,
    chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } },
    transport: http(chain.rpcUrl),
  })
  const payToBefore = await chain.balanceOf(chain.payTo)
  const copy = await wallet.writeContract({
    address: chain.usdc,
    abi: transferAbi,
    functionName: 'transferWithAuthorization',
    args: [
      a.from as `0x${string}`,
      a.to as `0x${string}`,
      BigInt(a.value),
      BigInt(a.validAfter),
      BigInt(a.validBefore),
      a.nonce as `0x${string}`,
      payload.signature,
    ],
    gas: 200_000n,
  })
  const mined = await chain.publicClient.waitForTransactionReceipt({ hash: copy })
  expect(mined.status).toBe('success')
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 3_000_000n)

  // The chain moves on; the lagging node stays where it was before the copy.
  await chain.testClient.mine({ blocks: 5 })
  laggingAt = mined.blockNumber - 1n
  const response = await post(url, { amountUsdc: '3.000000' }, { 'x-payment': header })
  // Money moved: never an invitation to sign again.
  expect(response.status).toBe(409)
  expect(response.body.error).toMatchObject({ code: 'payment_reconciling', reconciling: true })
  const inFlight = await stack.store.zrange(stack.keys.paymentsInFlight, 0, -1)
  expect(inFlight).toHaveLength(1)

  // The reconciler reads the authorization at a block number, which a node answers only if it has it.
  laggingAt = null
  expect(await reconcilePayments(deps, 0)).toBe(1)
  const accountId = await stack.store.hget(stack.keys.wallets, payer.address.toLowerCase())
  expect(await stack.store.hget(stack.keys.account(accountId!), 'funded')).toBe('3000000')
  expect(await reconcilePayments(deps, 0)).toBe(0)
  const replay = await post(url, { amountUsdc: '3.000000' }, { 'x-payment': header })
  expect(replay.status).toBe(409)
  expect(replay.body.error).toMatchObject({ code: 'payment_already_credited', transaction: copy })
}, 60_000)
