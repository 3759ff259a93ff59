// A payout read through a load-balanced RPC one of whose nodes is still on the fork a reorg left:
// it answers the payout's receipt as that fork holds it (mined, at depth), while heights and blocks
// come from the chain as it is. The transfer is not on the chain: the payout is never confirmed
// (nor failed) on that word; the same signed bytes are sent again, and the supplier paid once.
// The on-chain audit reads receipts through the same node: its word on what the chain holds is the
// chain's as it is, never the left fork's.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createWalletClient, encodeAbiParameters, type Hex, http, keccak256, numberToHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import type { FundingChain } from '../../src/funding/chain.ts'
import { auditPayoutsOnChain } from '../../src/payouts/audit.ts'
import type { PayoutSender } from '../../src/payouts/sender.ts'
import type { Payout, PayoutStore } from '../../src/payouts/store.ts'
import { payoutWallet } from '../../src/payouts/wallet.ts'
import type { Keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type LaggingRpc, startLaggingRpc } from '../helpers/lagging-rpc.ts'
import {
  type PayoutChain,
  payoutSender,
  payoutWalletParts,
  startPayoutChain,
} from '../helpers/payout-chain.ts'
import { passUntil, payoutOf as payoutFor, supplierMoney, transfersFrom } from '../helpers/payouts.ts'
import { until } from '../helpers/wait.ts'

let opened: PayoutChain<LaggingRpc>
let chain: TestChain
let store: Store
let keys: Keyspace
let payouts: PayoutStore
let rpc: LaggingRpc
// Deeper than the reorgs below, so the stale receipt is at depth when it is read.
const CONFIRMATIONS = 3

beforeAll(async () => {
  opened = await startPayoutChain({ name: 'svc-test-payouts-stale-fork', rpc: startLaggingRpc })
  ;({ chain, store, rpc } = opened)
  ;({ keys, payouts } = opened.fresh())
})
afterAll(() => opened.stop())

/** A fresh payout wallet and its sender, reading the chain through the proxy. */
async function senderBehindRpc(beforeBroadcast?: (payout: Payout) => Promise<void>) {
  const { key, address, funding, onChain } = await payoutWalletParts(chain, CONFIRMATIONS, {
    rpcUrl: rpc.url,
  })
  const sender = (hook = beforeBroadcast) =>
    payoutSender(payouts, payoutWallet(key, funding, onChain), onChain, {
      confirmations: CONFIRMATIONS,
      receiptTimeoutMs: 1_000,
      beforeBroadcast: hook,
    })
  return { key, address, onChain, sender }
}

const payoutOf = (amount: number) => payoutFor({ store, keys, payouts }, amount)

/** Passes until the payout is confirmed or failed, a block mined after each. */
async function finish(s: PayoutSender, id: string): Promise<Payout> {
  let done: Payout | undefined
  await until(async () => {
    await s.tick()
    const now = (await payouts.get(id))!
    if (now.state === 'confirmed' || now.state === 'failed') done = now
    else await chain.testClient.mine({ blocks: 1 })
    return done !== undefined
  })
  return done!
}

test('a payout mined, then reorged out: the stale fork’s receipt never confirms it; the same bytes are paid once', async () => {
  rpc.set({})
  const { address, onChain, sender } = await senderBehindRpc()
  const { supplierId, payout, to } = await payoutOf(1_000_000)
  const snapshot = await chain.testClient.snapshot()
  const mined = await passUntil(sender(), payouts, payout.id, (p) => p.state === 'pending')
  // The proxy's old-fork node has answered the receipt.
  expect((await onChain.receipt(mined.txHash as Hex))?.status).toBe('success')

  // The reorg takes the block out (its transaction with it); the chain grows past the depth.
  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.mine({ blocks: CONFIRMATIONS + 2 })
  expect(await transfersFrom(chain, address, to)).toEqual([])
  rpc.set({ staleFork: true })
  const stale = rpc.lagged.eth_getTransactionReceipt ?? 0

  const done = await finish(sender(), payout.id)
  expect(rpc.lagged.eth_getTransactionReceipt ?? 0).toBeGreaterThan(stale)
  expect(done).toMatchObject({ state: 'confirmed', txHash: mined.txHash })
  expect(await transfersFrom(chain, address, to)).toEqual([{ to, value: 1_000_000n, tx: mined.txHash! }])
  expect(await supplierMoney({ store, keys }, supplierId)).toEqual({
    paidOut: 1_000_000,
    pending: 0,
    payable: 0,
  })
}, 90_000)

test('a payout reverted, then reorged out: the stale fork’s revert never fails it; the same bytes, mined where they succeed, pay once', async () => {
  rpc.set({})
  const { address, onChain, sender } = await senderBehindRpc()
  const { supplierId, payout, to } = await payoutOf(1_000_000)
  // TestUsdc's balanceOf mapping is slot 3: emptied on the fork that is reorged away.
  const slot = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [address, 3n]))
  const snapshot = await chain.testClient.snapshot()
  const emptied = sender(async () => {
    await chain.testClient.setStorageAt({
      address: chain.usdc,
      index: slot,
      value: numberToHex(0n, { size: 32 }),
    })
  })
  const reverted = await passUntil(
    emptied,
    payouts,
    payout.id,
    async (p) => p.txHash !== null && (await onChain.receipt(p.txHash as Hex)) !== null,
  )
  expect((await onChain.receipt(reverted.txHash as Hex))?.status).toBe('reverted')

  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.mine({ blocks: CONFIRMATIONS + 2 })
  rpc.set({ staleFork: true })
  const stale = rpc.lagged.eth_getTransactionReceipt ?? 0

  const done = await finish(sender(undefined), payout.id)
  expect(rpc.lagged.eth_getTransactionReceipt ?? 0).toBeGreaterThan(stale)
  expect(done).toMatchObject({ state: 'confirmed', txHash: reverted.txHash })
  expect(await transfersFrom(chain, address, to)).toEqual([{ to, value: 1_000_000n, tx: reverted.txHash! }])
  expect(await supplierMoney({ store, keys }, supplierId)).toEqual({
    paidOut: 1_000_000,
    pending: 0,
    payable: 0,
  })
}, 90_000)

/** The audit's findings on one payout, read through the proxy (its stale node answering). */
async function auditOf(onChain: FundingChain, id: string) {
  const { findings } = await auditPayoutsOnChain(store, keys, onChain, chain.usdc)
  return findings.filter((f) => f.subject === `payout ${id}`)
}

test('a payout mined, reorged out, its nonce then taken by another transaction: failed, and the audit never takes the stale fork’s receipt for its transfer', async () => {
  rpc.set({})
  const { key, address, onChain, sender } = await senderBehindRpc()
  const { supplierId, payout, to } = await payoutOf(1_000_000)
  const snapshot = await chain.testClient.snapshot()
  const mined = await passUntil(sender(), payouts, payout.id, (p) => p.state === 'pending')
  expect((await onChain.receipt(mined.txHash as Hex))?.status).toBe('success')

  // After the reorg the wallet's next transaction, not the payout, holds the nonce.
  await chain.testClient.revert({ id: snapshot })
  const wallet = createWalletClient({
    account: privateKeyToAccount(key),
    chain: { ...chain.publicClient.chain!, rpcUrls: { default: { http: [chain.rpcUrl] } } },
    transport: http(chain.rpcUrl),
  })
  const other = await wallet.sendTransaction({ to: address, value: 1n, nonce: mined.nonce! })
  await chain.publicClient.waitForTransactionReceipt({ hash: other })
  await chain.testClient.mine({ blocks: CONFIRMATIONS + 2 })
  rpc.set({ staleFork: true })

  const done = await finish(sender(), payout.id)
  expect(done).toMatchObject({ state: 'failed', error: 'its nonce was used by another transaction' })
  expect(await transfersFrom(chain, address, to)).toEqual([])
  expect(await supplierMoney({ store, keys }, supplierId)).toEqual({
    paidOut: 0,
    pending: 0,
    payable: 1_000_000,
  })
  const stale = rpc.lagged.eth_getTransactionReceipt ?? 0
  expect(await auditOf(onChain, payout.id)).toEqual([])
  expect(rpc.lagged.eth_getTransactionReceipt ?? 0).toBeGreaterThan(stale)
}, 90_000)

test('a confirmed payout a deeper reorg took out: the audit reports it, whatever the stale fork’s receipt says', async () => {
  rpc.set({})
  const { onChain, sender } = await senderBehindRpc()
  const { payout } = await payoutOf(1_000_000)
  const snapshot = await chain.testClient.snapshot()
  const done = await finish(sender(), payout.id)
  expect(done.state).toBe('confirmed')
  expect(await auditOf(onChain, payout.id)).toEqual([])

  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.mine({ blocks: CONFIRMATIONS + 2 })
  rpc.set({ staleFork: true })
  const stale = rpc.lagged.eth_getTransactionReceipt ?? 0
  expect(await auditOf(onChain, payout.id)).toEqual([
    {
      subject: `payout ${payout.id}`,
      problem: `confirmed but none of its transactions [${done.txHash}] is a success on chain`,
    },
  ])
  expect(rpc.lagged.eth_getTransactionReceipt ?? 0).toBeGreaterThan(stale)
  rpc.set({})
}, 90_000)
