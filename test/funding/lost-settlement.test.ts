// Transfers the gateway never recorded. A facilitator that sends the transfer and then answers
// /settle with an error: the gateway never learns the transaction, answers 502, and keeps the
// claim. A copy of the authorization settled by someone else ahead of the relayer's transaction,
// which reverts. Either way the reconciler finds the transfer in the token's logs (AuthorizationUsed
// for the claim's payer and nonce, from the block recorded before settling) and credits it once.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createWalletClient, http, parseAbi } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { AccountStore } from '../../src/accounts/accounts.ts'
import { accountForPayer } from '../../src/funding/accounts.ts'
import { createFunding, watchDeps } from '../../src/funding/index.ts'
import { reconcilePayments } from '../../src/funding/reconciler.ts'
import type { WatchDeps } from '../../src/funding/watcher.ts'
import { createLogger } from '../../src/logger.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { startFacilitator, type TestFacilitator } from '../helpers/facilitator.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { challenge, post, waitFor, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let facilitator: TestFacilitator
let stack: TestStack
let deps: WatchDeps
let selfSettled: TestStack
let selfDeps: WatchDeps
let chainStack: ChainStack<undefined, TestFacilitator>

function reconcilerFor(stack: TestStack): WatchDeps {
  const config = stack.config
  const logger = createLogger('silent')
  const funding = createFunding(config.funding!, stack.store, stack.keys, logger)
  const accounts = new AccountStore(stack.store, stack.keys)
  return watchDeps(funding, logger, async (payer) => {
    return (await accountForPayer(accounts, payer, config.defaultMaxPriceCents)).accountId
  })
}

beforeAll(async () => {
  // The stacks' own watchers stay idle: the tests run the reconciler's passes themselves.
  chainStack = await startChainStack({
    confirmations: 1,
    facilitator: startFacilitator,
    env: { SVC_X402_WATCH_INTERVAL_MS: '600000' },
  })
  ;({ chain, stack, facilitator } = chainStack)
  deps = reconcilerFor(stack)
  selfSettled = await startStack({ env: { ...chain.env(1), SVC_X402_WATCH_INTERVAL_MS: '600000' } })
  selfDeps = reconcilerFor(selfSettled)
}, 30_000)
afterAll(async () => {
  await chain.testClient.setAutomine(true)
  await selfSettled.stop()
  await chainStack.stop()
})

test('settled by the facilitator, reported as failed -> 502 -> credited from the chain once', async () => {
  const url = `${stack.url}/v1/x402/signup`
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(payer, await challenge(url, { amountUsdc: '3.000000' }))
  const payToBefore = await chain.balanceOf(chain.payTo)

  facilitator.failAfterSettle = true
  const response = await post(url, { amountUsdc: '3.000000' }, { 'x-payment': header })
  facilitator.failAfterSettle = false
  expect(response.status).toBe(502)
  expect(response.body.error).toMatchObject({ code: 'settle_failed' })
  // The money moved; Redis holds only the claim, with no transaction.
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 3_000_000n)
  const [id] = await stack.store.zrange(stack.keys.paymentsInFlight, 0, -1)
  const claim = await stack.store.hgetall(stack.keys.authorization(id!))
  expect(claim.state).toBe('claimed')
  expect(claim.tx).toBeUndefined()
  expect(claim.fromBlock).toMatch(/^\d+$/)

  expect(await reconcilePayments(deps, 0)).toBe(1)
  const accountId = await stack.store.hget(stack.keys.wallets, payer.address.toLowerCase())
  expect(accountId).toBeString()
  expect(await stack.store.hget(stack.keys.account(accountId!), 'funded')).toBe('3000000')
  expect(await stack.store.zcard(stack.keys.paymentsInFlight)).toBe(0)
  const credited = await stack.store.hgetall(stack.keys.authorization(id!))
  expect(credited.state).toBe('credited')
  const transaction = credited.paymentId!.split(':')[1]!
  const receipt = await chain.publicClient.getTransactionReceipt({ hash: transaction as `0x${string}` })
  expect(receipt.status).toBe('success')

  // Again: nothing to do, nothing changes.
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  expect(await reconcilePayments(deps, 0)).toBe(0)
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)

  // The payer's copy of the header is a replay of a credited payment.
  const replay = await post(url, { amountUsdc: '3.000000' }, { 'x-payment': header })
  expect(replay.status).toBe(409)
  expect(replay.body.error).toMatchObject({ code: 'payment_already_credited', transaction })
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 3_000_000n)
})

test('a copy settled ahead of the relayer: ours reverts -> 409 reconciling -> the copy is credited once', async () => {
  const url = `${selfSettled.url}/v1/x402/signup`
  const payer = await chain.newPayer(10_000_000n)
  const header = await xPayment(payer, await challenge(url, { amountUsdc: '4.000000' }))
  const { payload } = JSON.parse(Buffer.from(header, 'base64').toString()) as {
    payload: { signature: `0x${string}`; authorization: Record<string, string> }
  }
  const a = payload.authorization as Record<
    'from' | 'to' | 'value' | 'validAfter' | 'validBefore' | 'nonce',
    string
  >
  // Whoever holds a copy of the header can send it; this one pays a higher tip.
  const copier = privateKeyToAccount(generatePrivateKey())
  await chain.testClient.setBalance({ address: copier.address, value: 10n ** 18n })
  const wallet = createWalletClient({
    account: copier,
    chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } },
    transport: http(chain.rpcUrl),
  })
  const payToBefore = await chain.balanceOf(chain.payTo)

  await chain.testClient.setAutomine(false)
  let response: Awaited<ReturnType<typeof post>>
  let copy: `0x${string}`
  try {
    const answer = post(url, { amountUsdc: '4.000000' }, { 'x-payment': header })
    const sent = await waitFor(
      async () => {
        const [id] = await selfSettled.store.zrange(selfSettled.keys.paymentsInFlight, 0, -1)
        return id ? await selfSettled.store.hgetall(selfSettled.keys.authorization(id)) : {}
      },
      (record) => record.state === 'sent',
      20_000,
    )
    expect(sent.state).toBe('sent')
    const ours = sent.tx as `0x${string}`
    await waitFor(
      () =>
        chain.publicClient.getTransaction({ hash: ours }).then(
          () => true,
          () => false,
        ),
      (known) => known,
    )
    copy = await wallet.writeContract({
      address: chain.usdc,
      abi: parseAbi([
        'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
      ]),
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
      maxFeePerGas: 100_000_000_000n,
      maxPriorityFeePerGas: 50_000_000_000n,
    })
    await chain.testClient.mine({ blocks: 1 })
    response = await answer
    expect((await chain.publicClient.getTransactionReceipt({ hash: ours })).status).toBe('reverted')
  } finally {
    await chain.testClient.setAutomine(true)
  }
  expect((await chain.publicClient.getTransactionReceipt({ hash: copy })).status).toBe('success')
  expect(response.status).toBe(409)
  expect(response.body.error).toMatchObject({ code: 'payment_reconciling', reconciling: true })
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 4_000_000n)

  expect(await reconcilePayments(selfDeps, 0)).toBe(1)
  const accountId = await selfSettled.store.hget(selfSettled.keys.wallets, payer.address.toLowerCase())
  expect(await selfSettled.store.hget(selfSettled.keys.account(accountId!), 'funded')).toBe('4000000')
  expect(await reconcilePayments(selfDeps, 0)).toBe(0)
  const replay = await post(url, { amountUsdc: '4.000000' }, { 'x-payment': header })
  expect(replay.status).toBe(409)
  expect(replay.body.error).toMatchObject({ code: 'payment_already_credited', transaction: copy })
}, 30_000)
