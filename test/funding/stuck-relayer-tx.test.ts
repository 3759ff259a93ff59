// A relayer transaction whose max fee the base fee passed right after it was priced: a Geth-style
// node keeps it pending in its pool, unmined, and the relayer's later sends wait behind it. The
// relayer signs it again at its nonce with higher fees once it stayed unmined SVC_RELAYER_BUMP_MS,
// the new hash recorded on the claim before the broadcast: both payments settle, each credited
// once, and the audit agrees. Past SVC_RELAYER_MAX_FEE_GWEI nothing is signed again, and the log
// says so. Real anvil behind a pool of the test's own (test/helpers/holding-rpc.ts), real Redis,
// real HTTP.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import {
  createPublicClient,
  type Hex,
  http,
  keccak256,
  type PublicClient,
  parseGwei,
  parseTransaction,
} from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { authorizationId } from '../../src/funding/ledger.ts'
import { Relayer } from '../../src/funding/relayer.ts'
import { SenderTurns } from '../../src/funding/sender-lock.ts'
import { createLogger } from '../../src/logger.ts'
import { logCapture } from '../helpers/accounts.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { expectFundingAuditClean, untilFundingAtRest } from '../helpers/funding-audit.ts'
import { type HoldingRpc, startHoldingRpc } from '../helpers/holding-rpc.ts'
import { marketFixture } from '../helpers/market.ts'
import type { TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { fundedOf, pay } from '../helpers/x402.ts'

let chain: TestChain
let rpc: HoldingRpc
let stack: TestStack
let chainStack: ChainStack<HoldingRpc>

beforeAll(async () => {
  chainStack = await startChainStack({
    confirmations: 1,
    rpc: startHoldingRpc,
    env: {
      SVC_X402_RECEIPT_TIMEOUT_MS: '500',
      SVC_X402_WATCH_INTERVAL_MS: '50',
      SVC_RELAYER_BUMP_MS: '300',
      SVC_RELAYER_MAX_FEE_GWEI: '1000.000000',
    },
  })
  ;({ chain, stack, rpc } = chainStack)
}, 30_000)
afterAll(() => chainStack.stop())

const AMOUNT = 2_000_000n
const HELD = 10_000_000n
const RISEN = parseGwei('50')
const signupUrl = () => `${stack.url}/v1/x402/signup`

test('a relayer transaction held pending under a risen base fee is signed again at its nonce: both payments settle, each credited once', async () => {
  const relayer = privateKeyToAccount(chain.relayerKey).address
  const payToBefore = await chain.balanceOf(chain.payTo)
  const [first, second] = [await chain.newPayer(HELD), await chain.newPayer(HELD)]

  rpc.riseAtNextSend(RISEN)
  const firstAnswer = await pay(signupUrl(), { amountUsdc: '2.000000' }, first)
  expect(firstAnswer.response.status).toBe(409)
  // The first send through the pool: held, its fee under the base fee that rose.
  const stuck = rpc.broadcasts[0]!
  const signed = stuck.tx
  expect(signed.maxFeePerGas! < RISEN).toBe(true)
  const nonce = JSON.parse(Buffer.from(firstAnswer.header, 'base64').toString()).payload.authorization.nonce
  const authId = authorizationId(chain.chainId, chain.usdc, first.address, nonce)
  // A later payment's send queues behind it.
  const secondAnswer = await pay(signupUrl(), { amountUsdc: '2.000000' }, second)
  expect([201, 409]).toContain(secondAnswer.response.status)

  await until(
    async () => (await fundedOf(stack, first)) === AMOUNT && (await fundedOf(stack, second)) === AMOUNT,
    50,
  )
  const claim = await stack.store.hgetall(stack.keys.authorization(authId))
  expect(claim.state).toBe('credited')
  const minedHash = claim.paymentId!.split(':')[1] as Hex
  expect(minedHash).not.toBe(stuck.hash)
  // Recorded on the claim before its broadcast: the hash last recorded is the one mined.
  expect(claim.tx).toBe(minedHash)
  const mined = await chain.publicClient.getTransaction({ hash: minedHash })
  expect([mined.from.toLowerCase(), mined.nonce, mined.to, mined.input, mined.gas] as unknown[]).toEqual([
    relayer.toLowerCase(),
    signed.nonce,
    signed.to,
    signed.data,
    signed.gas,
  ])
  expect(mined.maxFeePerGas! >= RISEN).toBe(true)
  expect(mined.maxFeePerGas! <= parseGwei('1000')).toBe(true)
  await expect(chain.publicClient.getTransactionReceipt({ hash: stuck.hash })).rejects.toThrow()
  // The bytes kept at that nonce, to broadcast again on a gap, are the replacement's.
  const kept = await stack.store.hget(stack.keys.relayerSent(relayer.toLowerCase()), String(signed.nonce))
  expect(keccak256(kept as Hex)).toBe(minedHash)

  await untilFundingAtRest(stack)
  for (const payer of [first, second]) {
    expect(await fundedOf(stack, payer)).toBe(AMOUNT)
    expect(await chain.balanceOf(payer.address)).toBe(HELD - AMOUNT)
  }
  expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 2n * AMOUNT)
  await expectFundingAuditClean(stack, chain, 2)
}, 60_000)

test('a replacement is signed at most at the fee ceiling, and none past it is sent', async () => {
  const fx = marketFixture()
  const own = startHoldingRpc(chain.rpcUrl)
  try {
    const key = generatePrivateKey()
    const address = privateKeyToAccount(key).address
    await chain.testClient.setBalance({ address, value: 10n ** 18n })
    const viemChain = { ...baseSepolia, rpcUrls: { default: { http: [own.url] } } }
    const client = createPublicClient({ chain: viemChain, transport: http(own.url), cacheTime: 0 })
    const log = logCapture()
    const options = { afterMs: 0, maxFeePerGas: 0n, logger: createLogger('info', 'svc-test', log.stream) }
    const sender = new Relayer(key, client as PublicClient, viemChain, own.url, options)
    const turns = new SenderTurns(fx.store, fx.keys, address)
    const recorded: Hex[] = []
    // The same hash recorded again (asking whether its claim is still in flight) is one record.
    const onSigned = async (hash: Hex) => {
      if (recorded.at(-1) !== hash) recorded.push(hash)
    }

    own.riseAtNextSend(RISEN)
    const to = privateKeyToAccount(generatePrivateKey()).address
    const hash = await sender.send({ to, data: '0x' }, onSigned, turns)
    const original = parseTransaction(own.broadcasts[0]!.raw)
    // Room for one raise, not for the fee the node asks (its base fee and more).
    const ceiling = original.maxFeePerGas! * 2n
    expect(ceiling < RISEN).toBe(true)
    options.maxFeePerGas = ceiling

    expect(await sender.replaceUnmined(turns, () => onSigned)).toBe(1)
    expect(recorded).toHaveLength(2)
    const capped = own.broadcasts.find((b) => b.hash === recorded[1])!.tx
    expect([capped.nonce, capped.maxFeePerGas] as unknown[]).toEqual([original.nonce, ceiling])

    // The next raise is past the ceiling: nothing is signed, recorded or sent.
    const sent = own.broadcasts.length
    expect(await sender.replaceUnmined(turns, () => onSigned)).toBe(0)
    expect(recorded).toEqual([hash, recorded[1]!])
    expect(own.broadcasts.slice(sent).every((b) => b.hash === recorded[1])).toBe(true)
    expect(log.lines.some((line) => line.includes('SVC_RELAYER_MAX_FEE_GWEI'))).toBe(true)
    expect(await chain.publicClient.getTransactionCount({ address })).toBe(0)
    const kept = await fx.store.hget(fx.keys.relayerSent(address.toLowerCase()), String(original.nonce))
    expect(keccak256(kept as Hex)).toBe(recorded[1]!)
  } finally {
    own.stop()
    fx.close()
  }
}, 60_000)
