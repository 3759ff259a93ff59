// The payout key rotated while payouts of the old wallet were in flight: no sender of the old
// wallet is left, and the new wallet's sender finishes them without the old key, under the old
// wallet's lock, read against the old wallet's nonces: a transfer broadcast is confirmed at depth,
// one recorded but never broadcast goes out as the recorded bytes, and one whose nonce the old
// wallet used for another transaction is failed (payable again). A fee bump only the old key can
// sign is logged once and shown to the operator; nothing is ever signed for the old wallet.
import { afterAll, beforeAll, beforeEach, expect, test } from 'bun:test'
import { createWalletClient, http } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import type { FundingConfig } from '../../src/config.ts'
import type { FundingChain } from '../../src/funding/chain.ts'
import { createLogger } from '../../src/logger.ts'
import { auditPayoutsOnChain } from '../../src/payouts/audit.ts'
import type { PayoutSender } from '../../src/payouts/sender.ts'
import { PayoutService } from '../../src/payouts/service.ts'
import type { Payout, PayoutStore } from '../../src/payouts/store.ts'
import { type PayoutWallet, payoutWallet } from '../../src/payouts/wallet.ts'
import type { Keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import { logCapture } from '../helpers/accounts.ts'
import type { TestChain } from '../helpers/chain.ts'
import {
  type PayoutChain,
  payoutSender,
  payoutWalletParts,
  startPayoutChain,
} from '../helpers/payout-chain.ts'
import {
  passUntil,
  payoutOf as payoutFor,
  payoutWalletOn,
  supplierMoney,
  transfersFrom,
} from '../helpers/payouts.ts'
import { until } from '../helpers/wait.ts'

let opened: PayoutChain
let chain: TestChain
let store: Store
let funding: FundingConfig
let onChain: FundingChain
let keys: Keyspace
let payouts: PayoutStore
/** The old payout wallet (A) and its key, and the new one (B), fresh for each test. */
let oldKey: `0x${string}`
let oldWallet: PayoutWallet
let newWallet: PayoutWallet
const logger = createLogger('silent')
const CONFIRMATIONS = 2

beforeAll(async () => {
  opened = await startPayoutChain({ name: 'svc-test-payouts-rotated' })
  ;({ chain, store } = opened)
  ;({ funding, onChain } = await payoutWalletParts(chain, CONFIRMATIONS, { usdc: 0n }))
})
afterAll(() => opened.stop())
beforeEach(async () => {
  ;({ keys, payouts } = opened.fresh())
  oldKey = (await payoutWalletOn(chain)).key
  oldWallet = payoutWallet(oldKey, funding, onChain)
  const fresh = await payoutWalletOn(chain)
  newWallet = payoutWallet(fresh.key, funding, onChain)
  // The new wallet has sent before: read against its nonces, the old wallet's nonce 0 looks used.
  await sendFrom(fresh.key, 2)
})

/** `count` plain transactions of the wallet (to itself), each mined. */
async function sendFrom(key: `0x${string}`, count: number, nonce?: number) {
  const account = privateKeyToAccount(key)
  const client = createWalletClient({ account, chain: onChain.chain, transport: http(chain.rpcUrl) })
  for (let i = 0; i < count; i++) {
    const hash = await client.sendTransaction({ to: account.address, value: 1n, nonce })
    await chain.publicClient.waitForTransactionReceipt({ hash })
  }
}

function senderOf(
  wallet: PayoutWallet,
  over: { bumpAfterMs?: number; beforeBroadcast?: (payout: Payout) => Promise<void> } = {},
  log = logger,
) {
  return payoutSender(
    payouts,
    wallet,
    onChain,
    { confirmations: CONFIRMATIONS, receiptTimeoutMs: 200, ...over },
    log,
  )
}

const payoutOf = (amount: number, earned = amount) => payoutFor({ store, keys, payouts }, amount, earned)

const money = (supplierId: string) => supplierMoney({ store, keys }, supplierId)

/** The old wallet's sender signs and records the payout, and dies before broadcasting it. */
async function signedThenKilled(id: string): Promise<Payout> {
  const dead = senderOf(oldWallet, { beforeBroadcast: () => new Promise<void>(() => {}) })
  void dead.tick()
  await until(async () => Boolean((await payouts.get(id))?.rawTx))
  dead.stop()
  const signed = (await payouts.get(id))!
  expect(signed).toMatchObject({ from: oldWallet.address, nonce: 0, state: 'sending' })
  return signed
}

/**
 * Passes of the new wallet's sender, a block mined after each, until the payout is confirmed or
 * failed; a payout left in flight for 20 s throws (a hang guard: the passes stop with the test).
 */
async function finishedBy(sender: PayoutSender, id: string): Promise<Payout> {
  const deadline = Date.now() + 20_000
  return passUntil(sender, payouts, id, async (p) => {
    if (p.state === 'confirmed' || p.state === 'failed') return true
    if (Date.now() > deadline) throw new Error(`payout ${id} still ${p.state}`)
    await chain.testClient.mine({ blocks: 1 })
    return false
  })
}

test('broadcast by the old wallet, its sender gone: the new wallet confirms it at depth, one transfer', async () => {
  const { supplierId, payout, to } = await payoutOf(1_100_000)
  await chain.testClient.setAutomine(false)
  let sent: Payout
  try {
    // the old wallet's last pass: signed, recorded, broadcast, not mined within its wait
    const old = senderOf(oldWallet)
    await until(async () => {
      await old.tick()
      return Boolean((await payouts.get(payout.id))?.rawTx)
    })
    old.stop()
    sent = (await payouts.get(payout.id))!
    expect(sent).toMatchObject({ state: 'sending', from: oldWallet.address, nonce: 0 })
    await chain.testClient.mine({ blocks: 1 })
  } finally {
    await chain.testClient.setAutomine(true)
  }
  expect((await onChain.receipt(sent.txHash!))?.status).toBe('success')
  const done = await finishedBy(senderOf(newWallet), payout.id)
  expect(done).toMatchObject({ state: 'confirmed', txHash: sent.txHash, hashes: [sent.txHash] })
  expect(await transfersFrom(chain, oldWallet.address, to)).toEqual([
    { to, value: 1_100_000n, tx: sent.txHash! },
  ])
  expect(await transfersFrom(chain, newWallet.address)).toEqual([])
  expect(await money(supplierId)).toEqual({ paidOut: 1_100_000, pending: 0, payable: 0 })
  expect(await auditPayoutsOnChain(store, keys, onChain, chain.usdc)).toEqual({ checked: 1, findings: [] })
}, 60_000)

test('recorded by the old wallet, never broadcast: the new wallet broadcasts the recorded bytes and confirms them', async () => {
  const { supplierId, payout, to } = await payoutOf(1_000_000, 2_000_000)
  const signed = await signedThenKilled(payout.id)
  expect(await onChain.receipt(signed.txHash!)).toBeNull()
  const done = await finishedBy(senderOf(newWallet), payout.id)
  expect(done).toMatchObject({ state: 'confirmed', txHash: signed.txHash, hashes: [signed.txHash] })
  expect(await transfersFrom(chain, oldWallet.address, to)).toEqual([
    { to, value: 1_000_000n, tx: signed.txHash! },
  ])
  expect(await transfersFrom(chain, newWallet.address)).toEqual([])
  expect(await money(supplierId)).toEqual({ paidOut: 1_000_000, pending: 0, payable: 1_000_000 })
  expect(await auditPayoutsOnChain(store, keys, onChain, chain.usdc)).toEqual({ checked: 1, findings: [] })
}, 60_000)

test("the old wallet's nonce taken by another of its transactions: the new wallet fails the payout, payable again", async () => {
  const { supplierId, payout, to } = await payoutOf(1_200_000)
  const signed = await signedThenKilled(payout.id)
  // the old key, still held somewhere, sends another transaction at the payout's nonce
  await sendFrom(oldKey, 1, 0)
  const done = await finishedBy(senderOf(newWallet), payout.id)
  expect(done).toMatchObject({ state: 'failed', error: 'its nonce was used by another transaction' })
  expect(await onChain.receipt(signed.txHash!)).toBeNull()
  expect(await transfersFrom(chain, oldWallet.address, to)).toEqual([])
  expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 0, payable: 1_200_000 })
  expect(await auditPayoutsOnChain(store, keys, onChain, chain.usdc)).toEqual({ checked: 1, findings: [] })
}, 60_000)

test('a fee bump only the old key can sign: logged once, shown to the operator, nothing signed for the old wallet', async () => {
  const { payout } = await payoutOf(1_300_000)
  const signed = await signedThenKilled(payout.id)
  const logs = logCapture()
  const rotated = senderOf(newWallet, { bumpAfterMs: 100 }, createLogger('warn', 'svc-test', logs.stream))
  const service = new PayoutService(
    store,
    keys,
    {
      privateKey: undefined,
      minMicros: 1,
      lowUsdcMicros: 0,
      lowGasWei: 0n,
      intervalMs: 50,
      lockTtlMs: 300,
      bumpAfterMs: 100,
    },
    () => {},
    newWallet.address,
  )
  await chain.testClient.setAutomine(false)
  try {
    const needed = (line: string) => line.includes(payout.id) && line.includes('needs the key')
    const deadline = Date.now() + 20_000
    await until(async () => {
      if (Date.now() > deadline) throw new Error('no fee bump was found waiting on the old key')
      await rotated.tick()
      return logs.lines.some(needed)
    })
    for (let pass = 0; pass < 3; pass++) await rotated.tick()
    expect(logs.lines.filter(needed)).toHaveLength(1)
    const [row] = (await service.inFlight()).data
    expect(row).toMatchObject({ id: payout.id, from: oldWallet.address, signingKeyNeeded: true })
    // the recorded bytes went out again: the pool holds them, and no replacement was signed
    expect(await onChain.client.getTransaction({ hash: signed.txHash! })).toMatchObject({
      hash: signed.txHash,
    })
    expect((await payouts.get(payout.id))!.hashes).toEqual([signed.txHash!])
    await chain.testClient.mine({ blocks: 1 })
  } finally {
    await chain.testClient.setAutomine(true)
  }
  const done = await finishedBy(rotated, payout.id)
  expect(done).toMatchObject({ state: 'confirmed', txHash: signed.txHash })
  expect((await service.inFlight()).data).toEqual([])
}, 60_000)
