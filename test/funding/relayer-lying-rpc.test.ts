// The relayer behind an RPC that lies or lags (a proxy of the test's own, test/helpers/lying-rpc.ts,
// in front of a Geth-style pool, test/helpers/holding-rpc.ts, in front of anvil): which of its
// sends are unmined is the node's word, and nothing another chain or a node behind says makes it
// forget a stuck send, or raise or cancel one that is mined. A send whose kept bytes are stale (a
// replacement of it mined) and cancelled on a node's word that it is unmined moves no money twice.
import { afterAll, beforeAll, beforeEach, expect, test } from 'bun:test'
import {
  createPublicClient,
  encodeFunctionData,
  type Hex,
  http,
  keccak256,
  type PublicClient,
  parseGwei,
  toHex,
} from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { PaymentLedger } from '../../src/funding/ledger.ts'
import { Relayer } from '../../src/funding/relayer.ts'
import { isCancel } from '../../src/funding/replacement.ts'
import { SenderTurns } from '../../src/funding/sender-lock.ts'
import type { ClaimOf } from '../../src/funding/unmined.ts'
import { createLogger } from '../../src/logger.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { logCapture } from '../helpers/accounts.ts'
import { startChain, type TestChain, usdcAbi } from '../helpers/chain.ts'
import { type HoldingRpc, startHoldingRpc } from '../helpers/holding-rpc.ts'
import { type LyingRpc, startLyingRpc } from '../helpers/lying-rpc.ts'
import { type MarketFixture, marketFixture } from '../helpers/market.ts'
import { until } from '../helpers/wait.ts'

let chain: TestChain
let other: TestChain
let pool: HoldingRpc
let rpc: LyingRpc
let fx: MarketFixture
let ledger: PaymentLedger

beforeAll(async () => {
  chain = await startChain()
  other = await startChain(31_337)
  pool = startHoldingRpc(chain.rpcUrl)
  rpc = startLyingRpc(pool.url)
  fx = marketFixture()
  ledger = new PaymentLedger(fx.store, fx.keys)
}, 60_000)
afterAll(async () => {
  rpc.stop()
  pool.stop()
  fx.close()
  await other.stop()
  await chain.stop()
})
beforeEach(() => {
  rpc.route(pool.url)
  rpc.lie(null)
})

const AMOUNT = 2_000_000n
const CEILING = parseGwei('100')

/** A relayer key of its own, funded on both chains, reading the chain through the lying RPC. */
async function relayerOf() {
  const key = generatePrivateKey()
  const address = privateKeyToAccount(key).address
  for (const c of [chain, other]) await c.testClient.setBalance({ address, value: 10n ** 18n })
  await chain.mint(address, AMOUNT)
  const viemChain = { ...baseSepolia, rpcUrls: { default: { http: [rpc.url] } } }
  const client = createPublicClient({
    chain: viemChain,
    transport: http(rpc.url, { retryCount: 0 }),
    cacheTime: 0,
  })
  const log = logCapture()
  const logger = createLogger('info', 'svc-test', log.stream)
  const options = { afterMs: 0, maxFeePerGas: CEILING, logger }
  const relayer = new Relayer(key, client as PublicClient, viemChain, rpc.url, options)
  const turns = new SenderTurns(fx.store, fx.keys, address)
  const to = privateKeyToAccount(generatePrivateKey()).address
  const transfer = encodeFunctionData({ abi: usdcAbi, functionName: 'transfer', args: [to, AMOUNT] })
  const kept = async (nonce: number) =>
    (await fx.store.hget(fx.keys.relayerSent(address.toLowerCase()), String(nonce))) as Hex
  const mined = () => chain.publicClient.getTransactionCount({ address })
  const logged = (text: string) => log.lines.some((line) => line.includes(text))
  return { address, relayer, turns, to, transfer, kept, mined, logged }
}

/** A claim in flight, and the recorder its sends' hashes go on. */
async function claimInFlight() {
  const id = `${chain.chainId}:${chain.usdc}:${privateKeyToAccount(generatePrivateKey()).address}:${toHex(
    BigInt(Date.now()),
    { size: 32 },
  )}`.toLowerCase()
  const claim = await ledger.claim({
    authorizationId: id,
    kind: 'refill',
    accountId: 'acct_test',
    payer: privateKeyToAccount(generatePrivateKey()).address,
    amount: Number(AMOUNT) as MicroUsdc,
    validBefore: BigInt(Math.floor(Date.now() / 1000) + 3600),
  })
  expect(claim).toEqual({ claimed: true })
  const record = (hash: Hex) => ledger.markSent(id, hash)
  const claimOf: ClaimOf = () => record
  const tx = async () => (await ledger.authorization(id))?.tx
  return { id, record, claimOf, tx }
}

/** A node behind: every count answered as of the block before `block`. */
const countsBefore = (block: bigint) =>
  rpc.lie(async (call, real) => {
    if (call.method !== 'eth_getTransactionCount') return real()
    const [address] = call.params as [string]
    const answer = await fetch(chain.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...call, params: [address, toHex(block - 1n)] }),
    })
    return answer.json()
  })

test('another chain counting the key further: its stuck send is not forgotten, and is raised and mined once the RPC is back', async () => {
  const r = await relayerOf()
  await other.testClient.setNonce({ address: r.address, nonce: 5 })
  // Held under a base fee that rose right after it was priced.
  pool.riseAtNextSend(parseGwei('5'))
  const stuck = await r.relayer.send({ to: chain.usdc, data: r.transfer }, async () => {}, r.turns)
  expect(await r.mined()).toBe(0)

  // The whole pass answered by the other chain: nothing raised, nothing forgotten.
  rpc.route(other.rpcUrl)
  const broadcasts = rpc.calls.eth_sendRawTransaction ?? 0
  expect(await r.relayer.replaceUnmined(r.turns)).toBe(0)
  expect(rpc.calls.eth_sendRawTransaction ?? 0).toBe(broadcasts)
  expect(await fx.store.hget(fx.keys.relayerUnmined(r.address.toLowerCase()), '0')).not.toBeNull()
  expect(keccak256(await r.kept(0))).toBe(stuck)
  expect(r.logged('relayer RPC answers for another chain')).toBe(true)

  // A send while it answers for the other chain takes no nonce of its count: refused unsigned.
  await expect(r.relayer.send({ to: r.to, data: '0x' }, async () => {}, r.turns)).rejects.toThrow(
    'another chain',
  )

  // Back on the funding chain: raised, and mined, the transfer once.
  rpc.route(pool.url)
  expect(await r.relayer.replaceUnmined(r.turns)).toBe(1)
  await until(async () => (await r.mined()) === 1, 50)
  expect(await chain.balanceOf(r.to)).toBe(AMOUNT)
}, 60_000)

test('a node behind counting a mined send unmined: it is neither raised nor cancelled, and its claim keeps its hash', async () => {
  const r = await relayerOf()
  const claim = await claimInFlight()
  const sent = await r.relayer.send({ to: chain.usdc, data: r.transfer }, claim.record, r.turns)
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash: sent })
  expect(receipt.status).toBe('success')
  countsBefore(receipt.blockNumber)
  const broadcasts = rpc.calls.eth_sendRawTransaction ?? 0

  // Its claim in flight (its receipt not yet read by the request): no replacement is recorded on it.
  expect(await r.relayer.replaceUnmined(r.turns, claim.claimOf)).toBe(0)
  expect(await claim.tx()).toBe(sent)
  // Its claim gone (credited): no cancel is signed for it.
  const gone: ClaimOf = () => () => Promise.reject(new Error('no longer in flight'))
  expect(await r.relayer.replaceUnmined(r.turns, gone)).toBe(0)
  expect(r.logged('relayer transaction cancelled')).toBe(false)
  expect(rpc.calls.eth_sendRawTransaction ?? 0).toBe(broadcasts)
  expect(keccak256(await r.kept(0))).toBe(sent)
  expect(await chain.balanceOf(r.to)).toBe(AMOUNT)
}, 60_000)

test('a cancel signed from stale bytes (a replacement of the send mined) on a node behind moves no money twice, and never mines', async () => {
  const r = await relayerOf()
  const claim = await claimInFlight()
  pool.riseAtNextSend(parseGwei('50'))
  const original = await r.relayer.send({ to: chain.usdc, data: r.transfer }, claim.record, r.turns)
  const stale = await r.kept(0)
  expect(keccak256(stale)).toBe(original)
  // Raised: the replacement pays the base fee and is mined, its hash on the claim.
  expect(await r.relayer.replaceUnmined(r.turns, claim.claimOf)).toBe(1)
  await until(async () => (await r.mined()) === 1, 50)
  const replaced = (await claim.tx()) as Hex
  expect(replaced).not.toBe(original)
  const receipt = await chain.publicClient.getTransactionReceipt({ hash: replaced })
  expect(receipt.status).toBe('success')
  // The kept bytes are the original's again (the replacement's write was lost), unmined since long.
  const wallet = r.address.toLowerCase()
  await fx.store.hset(fx.keys.relayerSent(wallet), '0', stale)
  await fx.store.hset(fx.keys.relayerUnmined(wallet), '0', '1')
  // The claim is gone (credited from the replacement), and a node behind counts nonce 0 unmined.
  countsBefore(receipt.blockNumber)
  const gone: ClaimOf = () => () => Promise.reject(new Error('no longer in flight'))
  // Cancelled from the stale bytes: the cancel is signed and broadcast, and refused (nonce 0 is used).
  expect(await r.relayer.replaceUnmined(r.turns, gone)).toBe(1)
  expect(r.logged('relayer transaction cancelled')).toBe(true)
  expect(isCancel(await r.kept(0), r.address)).toBe(true)
  rpc.lie(null)
  await chain.testClient.mine({ blocks: 2 })
  // One transfer, by the replacement; whatever was signed at nonce 0 after it was never mined.
  expect(await r.mined()).toBe(1)
  expect(await chain.balanceOf(r.to)).toBe(AMOUNT)
  const cancel = keccak256(await r.kept(0))
  await expect(chain.publicClient.getTransactionReceipt({ hash: cancel })).rejects.toThrow()
  await expect(chain.publicClient.getTransactionReceipt({ hash: original })).rejects.toThrow()
  // The next pass, on the chain's own word, lets nonce 0 go: nothing more is signed for it.
  expect(await r.relayer.replaceUnmined(r.turns, gone)).toBe(0)
  expect(await fx.store.hget(fx.keys.relayerUnmined(wallet), '0')).toBeNull()
}, 60_000)
