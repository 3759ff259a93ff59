// A pending credit whose transaction a reorg took out, read through an RPC whose receipts come from
// a node still on the old fork: the receipt it answers (success, at depth) is not the chain's. The
// credit is never confirmed (spendable) on it: it stays pending while the authorization may still
// be used, and is taken back once that expired unused, the balance as before.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Hex } from 'viem'
import { AccountStore } from '../../src/accounts/accounts.ts'
import { auditAll } from '../../src/cli/audit.ts'
import { accountForPayer } from '../../src/funding/accounts.ts'
import { createFunding, watchDeps } from '../../src/funding/index.ts'
import { authorizationId, PaymentLedger, paymentId } from '../../src/funding/ledger.ts'
import { confirmPayments, type WatchDeps } from '../../src/funding/watcher.ts'
import { createLogger } from '../../src/logger.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { createAccount } from '../helpers/accounts.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { type LaggingRpc, startLaggingRpc } from '../helpers/lagging-rpc.ts'
import type { TestStack } from '../helpers/stack.ts'
import { challenge, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let rpc: LaggingRpc
let deps: WatchDeps
let ledger: PaymentLedger
let chainStack: ChainStack

beforeAll(async () => {
  chainStack = await startChainStack({ confirmations: 2, env: { SVC_X402_WATCH_INTERVAL_MS: '600000' } })
  ;({ chain, stack } = chainStack)
  rpc = startLaggingRpc(chain.rpcUrl)
  // The watcher's passes, run by the test, read the chain through the proxy.
  const logger = createLogger('silent')
  const funding = createFunding(
    { ...stack.config.funding!, chainRpcUrl: rpc.url },
    stack.store,
    stack.keys,
    logger,
  )
  const accounts = new AccountStore(stack.store, stack.keys)
  deps = watchDeps(
    funding,
    logger,
    async (payer) => (await accountForPayer(accounts, payer, stack.config.defaultMaxPriceCents)).accountId,
  )
  ledger = new PaymentLedger(stack.store, stack.keys)
}, 60_000)

afterAll(async () => {
  rpc.stop()
  await chainStack.stop()
})

const balances = (accountId: string) =>
  stack.store.hmget(stack.keys.account(accountId), 'pending', 'confirmed', 'funded')

test('a receipt from a node still on the fork a reorg left is not confirmed: the credit is taken back once expired', async () => {
  const { accountId } = await createAccount(stack)
  const before = await balances(accountId)
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(
    payer,
    await challenge(`${stack.url}/v1/x402/signup`, { amountUsdc: '4.000000' }),
  )
  const { validBefore, nonce } = JSON.parse(Buffer.from(header, 'base64').toString()).payload
    .authorization as { validBefore: string; nonce: Hex }
  const auth = authorizationId(chain.chainId, chain.usdc, payer.address, nonce)
  const claimed = await ledger.claim({
    authorizationId: auth,
    kind: 'refill',
    accountId,
    payer: payer.address,
    amount: 4_000_000 as MicroUsdc,
    fromBlock: await chain.publicClient.getBlockNumber(),
    validBefore: BigInt(validBefore),
  })
  expect(claimed.claimed).toBe(true)
  const snapshot = await chain.testClient.snapshot()
  const sent = await chain.sendAuthorization(header)
  const credited = await ledger.credit({
    accountId,
    amount: 4_000_000 as MicroUsdc,
    chainId: chain.chainId,
    transaction: sent.transaction,
    authorizationId: auth,
    blockNumber: sent.blockNumber,
    payer: payer.address,
  })
  expect(credited.status).toBe('credited')
  const id = paymentId(chain.chainId, sent.transaction, auth)
  // The proxy's old-fork node has seen the receipt.
  expect((await deps.chain.receipt(sent.transaction))?.status).toBe('success')

  // The reorg takes it out; the old-fork node still answers its receipt, past the depth.
  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.mine({ blocks: 5 })
  rpc.set({ staleFork: true })
  await confirmPayments(deps)
  await confirmPayments(deps)
  expect(rpc.lagged.eth_getTransactionReceipt).toBeGreaterThan(0)
  expect(await ledger.payment(id)).toMatchObject({ state: 'pending' })
  const [pending, confirmed, funded] = before.map(Number)
  expect(await balances(accountId)).toEqual([
    String(pending! + 4_000_000),
    String(confirmed),
    String(funded! + 4_000_000),
  ])

  // Past its validBefore at a confirmed block, unused on the chain: taken back, once.
  await chain.testClient.increaseTime({ seconds: stack.config.funding!.maxTimeoutSeconds + 120 })
  await chain.testClient.mine({ blocks: 3 })
  await confirmPayments(deps)
  await confirmPayments(deps)
  expect(await stack.store.hgetall(stack.keys.payment(id))).toEqual({})
  expect(await balances(accountId)).toEqual(before)
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
}, 90_000)
