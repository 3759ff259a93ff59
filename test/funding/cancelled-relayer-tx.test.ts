// A relayer transaction held pending under a base fee above SVC_RELAYER_MAX_FEE_GWEI: raised once to
// the ceiling, then refused every raise, while the key's later sends wait behind it. Its
// authorization expires unused, the reconciler releases its claim, and the send can never move
// money: it is cancelled (a transfer of nothing from the key to itself at its nonce), so the later
// send is mined and credited. The cancelled one moved no USDC, and its claim stays released. Real
// anvil behind a pool of the test's own (test/helpers/holding-rpc.ts), real Redis, real HTTP.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import {
  createPublicClient,
  encodeFunctionData,
  type Hex,
  http,
  keccak256,
  type PublicClient,
  parseGwei,
  parseTransaction,
} from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { eip3009Abi } from '../../src/funding/chain.ts'
import { authorizationId } from '../../src/funding/ledger.ts'
import { Relayer } from '../../src/funding/relayer.ts'
import { SenderTurns } from '../../src/funding/sender-lock.ts'
import { createLogger } from '../../src/logger.ts'
import { logCapture } from '../helpers/accounts.ts'
import { type TestChain, usdcAbi } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { expectFundingAuditClean, untilFundingAtRest } from '../helpers/funding-audit.ts'
import { type HoldingRpc, startHoldingRpc } from '../helpers/holding-rpc.ts'
import { marketFixture } from '../helpers/market.ts'
import type { TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { authorizationOf, challenge, fundedOf, pay, post, xPayment } from '../helpers/x402.ts'

let chain: TestChain
let rpc: HoldingRpc
let stack: TestStack
let chainStack: ChainStack<HoldingRpc>
const log = logCapture()

beforeAll(async () => {
  chainStack = await startChainStack({
    confirmations: 1,
    rpc: startHoldingRpc,
    env: {
      SVC_X402_RECEIPT_TIMEOUT_MS: '500',
      SVC_X402_WATCH_INTERVAL_MS: '50',
      SVC_RELAYER_BUMP_MS: '300',
      SVC_RELAYER_MAX_FEE_GWEI: '10.000000',
    },
    logger: createLogger('info', 'svc-test', log.stream),
  })
  ;({ chain, stack, rpc } = chainStack)
}, 30_000)
afterAll(() => chainStack.stop())

const AMOUNT = 2_000_000n
const HELD = 10_000_000n
// Above the ceiling: no raise the ceiling allows is mined.
const RISEN = parseGwei('15')
const signupUrl = () => `${stack.url}/v1/x402/signup`
const logged = (text: string) => log.lines.some((line) => line.includes(text))

test('a send its claim released is cancelled at its nonce: the later send is mined, no USDC moved by it', async () => {
  const relayer = privateKeyToAccount(chain.relayerKey).address
  const payToBefore = await chain.balanceOf(chain.payTo)
  const [first, second] = [await chain.newPayer(HELD), await chain.newPayer(HELD)]

  // An authorization that expires soon, as the chain's clock goes.
  rpc.riseAtNextSend(RISEN)
  const body = { amountUsdc: '2.000000' }
  const validBefore = String(Math.floor(Date.now() / 1000) + 30)
  const header = await xPayment(first, await challenge(signupUrl(), body), { validBefore })
  expect((await post(signupUrl(), body, { 'x-payment': header })).status).toBe(409)
  const stuck = rpc.broadcasts[0]!
  const nonce = authorizationOf(header).nonce
  const authId = authorizationId(chain.chainId, chain.usdc, first.address, nonce)
  // Raised once, to the ceiling, and no further: still held under the risen base fee.
  await until(() => logged('SVC_RELAYER_MAX_FEE_GWEI'), 50)
  expect((await stack.store.hget(stack.keys.authorization(authId), 'state')) as string).toBe('sent')

  // A later payment's send waits behind it.
  const secondAnswer = await pay(signupUrl(), body, second)
  expect(secondAnswer.response.status).toBe(409)
  expect(rpc.broadcasts.some((b) => b.tx.nonce === stuck.tx.nonce! + 1)).toBe(true)

  // The first authorization expires on chain; the reconciler lets its claim go.
  await chain.testClient.increaseTime({ seconds: 60 })
  await chain.testClient.mine({ blocks: 1 })
  await until(async () => (await fundedOf(stack, second)) === AMOUNT, 50)
  expect(logged('relayer transaction cancelled')).toBe(true)

  // The nonce went to the cancel: nothing, from the key to itself.
  const toSelf = (b: (typeof rpc.broadcasts)[number]) => b.tx.to?.toLowerCase() === relayer.toLowerCase()
  const cancel = rpc.broadcasts.find((b) => b.tx.nonce === stuck.tx.nonce && toSelf(b))!
  const receipt = await chain.publicClient.getTransactionReceipt({ hash: cancel.hash })
  expect(receipt.status).toBe('success')
  expect(receipt.logs).toEqual([])
  const mined = await chain.publicClient.getTransaction({ hash: cancel.hash })
  expect([mined.from.toLowerCase(), mined.to?.toLowerCase(), mined.value, mined.input]).toEqual([
    relayer.toLowerCase(),
    relayer.toLowerCase(),
    0n,
    '0x',
  ])
  for (const b of rpc.broadcasts.filter((b) => b.tx.nonce === stuck.tx.nonce && b !== cancel))
    await expect(chain.publicClient.getTransactionReceipt({ hash: b.hash })).rejects.toThrow()

  // The released claim stays released, its record marked expired (a late credit of it is refused):
  // its authorization unused, no USDC of the first payer moved.
  await untilFundingAtRest(stack)
  expect(await stack.store.hget(stack.keys.authorization(authId), 'state')).toBe('expired')
  const used = await chain.publicClient.readContract({
    address: chain.usdc,
    abi: eip3009Abi,
    functionName: 'authorizationState',
    args: [first.address, nonce],
  })
  expect(used).toBe(false)
  expect(await chain.balanceOf(first.address)).toBe(HELD)
  expect(await fundedOf(stack, first)).toBeNull()
  expect(await fundedOf(stack, second)).toBe(AMOUNT)
  expect(await chain.balanceOf(second.address)).toBe(HELD - AMOUNT)
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + AMOUNT)
  await expectFundingAuditClean(stack, chain, 1)
}, 60_000)

test('a send with no claim to ask is cancelled past the bound; a cancel costing more than the ceiling allows is not sent', async () => {
  const fx = marketFixture()
  const own = startHoldingRpc(chain.rpcUrl)
  try {
    const key = generatePrivateKey()
    const address = privateKeyToAccount(key).address
    await chain.testClient.setBalance({ address, value: 10n ** 18n })
    await chain.mint(address, AMOUNT)
    const viemChain = { ...baseSepolia, rpcUrls: { default: { http: [own.url] } } }
    const client = createPublicClient({ chain: viemChain, transport: http(own.url), cacheTime: 0 })
    const capture = logCapture()
    const logger = createLogger('info', 'svc-test', capture.stream)
    const options = { afterMs: 0, maxFeePerGas: 0n, cancelAfterMs: 0, logger }
    const sender = new Relayer(key, client as PublicClient, viemChain, own.url, options)
    const turns = new SenderTurns(fx.store, fx.keys, address)
    const to = privateKeyToAccount(generatePrivateKey()).address
    const transfer = encodeFunctionData({ abi: usdcAbi, functionName: 'transfer', args: [to, AMOUNT] })

    // Two sends held: a transfer, and behind it a plain one (21,000 gas).
    own.riseAtNextSend(RISEN)
    await sender.send({ to: chain.usdc, data: transfer }, async () => {}, turns)
    await sender.send({ to, data: '0x' }, async () => {}, turns)
    const [token, plain] = own.broadcasts.map((b) => b.tx)
    // No raise allowed for either: the ceiling is the transfer's fee, the plain one's is above it.
    options.maxFeePerGas = token!.maxFeePerGas!
    expect(token!.gas! > 21_000n).toBe(true)

    // The transfer's gas leaves its cancel room under what it could cost at the ceiling; the plain
    // one's cancel has none: blocked, not sent, and the log says so.
    expect(await sender.replaceUnmined(turns)).toBe(1)
    const kept = async (nonce: number) =>
      (await fx.store.hget(fx.keys.relayerSent(address.toLowerCase()), String(nonce))) as Hex
    const cancelBytes = await kept(token!.nonce!)
    const cancel = parseTransaction(cancelBytes)
    expect([cancel.to?.toLowerCase(), cancel.value ?? 0n, cancel.data ?? '0x', cancel.gas]).toEqual([
      address.toLowerCase(),
      0n,
      '0x',
      21_000n,
    ])
    expect(cancel.maxFeePerGas! * 21_000n <= token!.gas! * options.maxFeePerGas).toBe(true)
    expect(own.broadcasts.some((b) => b.hash === keccak256(cancelBytes))).toBe(true)
    expect(capture.lines.some((line) => line.includes('relayer transaction cancelled'))).toBe(true)
    expect(keccak256(await kept(plain!.nonce!))).toBe(own.broadcasts[1]!.hash)
    expect(capture.lines.some((line) => line.includes('relayer nonce blocked'))).toBe(true)
    const toSelf = own.broadcasts.filter((b) => b.tx.to?.toLowerCase() === address.toLowerCase())
    expect(toSelf.map((b) => b.tx.nonce)).toEqual([token!.nonce])
    // Nothing mined: held under the base fee, both of them, and no USDC moved.
    expect(await chain.publicClient.getTransactionCount({ address })).toBe(0)
    expect(await chain.balanceOf(address)).toBe(AMOUNT)
  } finally {
    own.stop()
    fx.close()
  }
}, 60_000)
