// A payout whose transfer reverts is failed, and its amount payable again, only once the revert has
// its confirmations: a reorg before then puts the same signed bytes back in the pool, and where
// they succeed the supplier is paid; failed at once, it would be paid again on asking.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { encodeAbiParameters, getAddress, keccak256, numberToHex } from 'viem'
import type { FundingChain } from '../../src/funding/chain.ts'
import { auditPayoutsOnChain } from '../../src/payouts/audit.ts'
import type { PayoutSender } from '../../src/payouts/sender.ts'
import type { Payout, PayoutStore } from '../../src/payouts/store.ts'
import type { PayoutWallet } from '../../src/payouts/wallet.ts'
import type { Keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import { SupplierStore } from '../../src/suppliers/store.ts'
import type { TestChain } from '../helpers/chain.ts'
import { seedSupplier } from '../helpers/market.ts'
import {
  type PayoutChain,
  payoutSender,
  payoutWalletParts,
  startPayoutChain,
} from '../helpers/payout-chain.ts'
import { passUntil, seedEarnings } from '../helpers/payouts.ts'

let opened: PayoutChain
let chain: TestChain
let store: Store
let onChain: FundingChain
let keys: Keyspace
let payouts: PayoutStore
let wallet: PayoutWallet
// Deep enough that a payout is final only after three blocks: the reorg below is one block deep.
const CONFIRMATIONS = 3

beforeAll(async () => {
  opened = await startPayoutChain({ name: 'svc-test-payout-revert' })
  ;({ chain, store } = opened)
  ;({ onChain, wallet } = await payoutWalletParts(chain, CONFIRMATIONS))
  ;({ keys, payouts } = opened.fresh())
})
afterAll(() => opened.stop())

function sender(beforeBroadcast?: (payout: Payout) => Promise<void>) {
  return payoutSender(payouts, wallet, onChain, {
    confirmations: CONFIRMATIONS,
    receiptTimeoutMs: 1_000,
    beforeBroadcast,
  })
}

async function finish(s: PayoutSender, id: string): Promise<Payout> {
  for (let i = 0; i < 200; i++) {
    await s.tick()
    const payout = (await payouts.get(id))!
    if (payout.state === 'confirmed' || payout.state === 'failed') return payout
    await chain.testClient.mine({ blocks: 1 })
  }
  throw new Error(`payout ${id} never finished`)
}

test('a revert is not final until confirmed: a reorg that mines the same bytes where they succeed pays once', async () => {
  const supplierId = await seedSupplier({ store, keys }, 'active')
  await seedEarnings({ store, keys }, supplierId, 1_000_000)
  const { payout } = await payouts.create(supplierId, 1_000_000, 'first', 1)
  const to = getAddress(payout.wallet)
  const owed = async () => {
    const s = await new SupplierStore(store, keys).require(supplierId)
    return { paidOut: s.paidOut, pending: s.pending }
  }

  // TestUsdc's balanceOf mapping is slot 3. The chain as it is before the fork.
  const slot = keccak256(
    encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [wallet.address, 3n]),
  )
  const snapshot = await chain.testClient.snapshot()
  // Fork A: the wallet's USDC is gone when the transfer is mined, so it reverts there.
  let raw: `0x${string}` | undefined
  const emptied = sender(async (p) => {
    raw = p.rawTx!
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
    async (p) => p.txHash !== null && (await onChain.receipt(p.txHash as `0x${string}`)) !== null,
  )
  expect((await onChain.receipt(reverted.txHash as `0x${string}`))?.status).toBe('reverted')
  // One confirmation of three: not failed, its amount not payable again.
  expect(reverted.state).toBe('sending')
  expect(await owed()).toMatchObject({ pending: 1_000_000 })
  await expect(payouts.create(supplierId, 1_000_000, 'second', 1)).rejects.toThrow()

  // Fork B wins (a one-block reorg): the reverted block is orphaned, its transaction goes back to
  // the pool and is mined again, now where the wallet holds its USDC.
  await chain.testClient.revert({ id: snapshot })
  await onChain.client.sendRawTransaction({ serializedTransaction: raw! })
  await chain.testClient.mine({ blocks: 1 })
  const done = await finish(sender(), payout.id)
  expect(done.state).toBe('confirmed')
  expect(await chain.balanceOf(to)).toBe(1_000_000n)
  expect(await owed()).toEqual({ paidOut: 1_000_000, pending: 0 })
  // The chain's own record agrees: one confirmed payout, its transfer there.
  expect((await auditPayoutsOnChain(store, keys, onChain, chain.usdc)).findings).toEqual([])
  // Had it been failed at the revert, the chain's record says what the payout record would not.
  await store.hset(keys.payout(payout.id), 'state', 'failed')
  expect((await auditPayoutsOnChain(store, keys, onChain, chain.usdc)).findings).toEqual([
    {
      subject: `payout ${payout.id}`,
      problem: `failed, but its transaction ${done.txHash} succeeded on chain`,
    },
  ])
  await store.hset(keys.payout(payout.id), 'state', 'confirmed')
}, 90_000)

test('a revert that stays, confirmed: failed, and its amount payable again', async () => {
  const supplierId = await seedSupplier({ store, keys }, 'active')
  await seedEarnings({ store, keys }, supplierId, 1_000_000)
  const { payout } = await payouts.create(supplierId, 1_000_000, 'third', 1)
  const slot = keccak256(
    encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [wallet.address, 3n]),
  )
  const before = await onChain.client.getStorageAt({ address: chain.usdc, slot })
  const emptied = sender(async () => {
    await chain.testClient.setStorageAt({
      address: chain.usdc,
      index: slot,
      value: numberToHex(0n, { size: 32 }),
    })
  })
  const failed = await finish(emptied, payout.id)
  await chain.testClient.setStorageAt({ address: chain.usdc, index: slot, value: before! })
  expect(failed.state).toBe('failed')
  expect(failed.error).toStartWith('reverted in block')
  const s = await new SupplierStore(store, keys).require(supplierId)
  expect(s.pending).toBe(0)
}, 90_000)
