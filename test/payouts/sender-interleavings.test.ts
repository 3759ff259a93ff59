// The payout sender against a real local chain, where a reorg or a wallet out of gas could pay
// twice or lose a payout: a reorg that mines the first signing in place of the included
// replacement is confirmed at that hash; a wallet that cannot pay a higher fee rebroadcasts what it
// signed rather than raising the fee pass after pass; amounts at the edges of payable. A rotated
// key (payouts signed by another payout wallet) is rotated-key.test.ts's.
import { afterAll, beforeAll, beforeEach, expect, test } from 'bun:test'
import { getAddress, keccak256, parseTransaction } from 'viem'
import type { FundingChain } from '../../src/funding/chain.ts'
import type { PayoutSender } from '../../src/payouts/sender.ts'
import type { Payout, PayoutStore } from '../../src/payouts/store.ts'
import type { PayoutWallet } from '../../src/payouts/wallet.ts'
import type { Keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import type { TestChain } from '../helpers/chain.ts'
import { seedSupplier } from '../helpers/market.ts'
import {
  type PayoutChain,
  payoutSender,
  payoutWalletParts,
  startPayoutChain,
} from '../helpers/payout-chain.ts'
import {
  passUntil,
  payoutOf as payoutFor,
  seedEarnings,
  supplierMoney,
  transfersFrom,
} from '../helpers/payouts.ts'
import { until } from '../helpers/wait.ts'

let opened: PayoutChain
let chain: TestChain
let store: Store
let onChain: FundingChain
let keys: Keyspace
let payouts: PayoutStore
let wallet: PayoutWallet

beforeAll(async () => {
  opened = await startPayoutChain({ name: 'svc-test-payouts-sender' })
  ;({ chain, store } = opened)
  ;({ onChain, wallet } = await payoutWalletParts(chain, 3))
})
afterAll(() => opened.stop())
beforeEach(() => {
  ;({ keys, payouts } = opened.fresh())
})

function sender(
  over: Partial<PayoutWallet> = {},
  confirmations = 3,
  bumpAfterMs = 60_000,
  beforeBroadcast?: (payout: Payout) => Promise<void>,
  receiptTimeoutMs = 1_000,
) {
  return payoutSender(payouts, { ...wallet, ...over }, onChain, {
    confirmations,
    receiptTimeoutMs,
    bumpAfterMs,
    beforeBroadcast,
  })
}

const payoutOf = (amount: number, earned = amount) => payoutFor({ store, keys, payouts }, amount, earned)

const money = (supplierId: string) => supplierMoney({ store, keys }, supplierId)

test('a reorg that mines the first signing in place of the included replacement: the payout is confirmed at the first hash', async () => {
  const { supplierId, payout, to } = await payoutOf(1_700_000)
  const broadcast: `0x${string}`[] = []
  const keeping = (raw: `0x${string}`) => {
    broadcast.push(raw)
    return wallet.broadcast(raw)
  }
  await chain.testClient.setAutomine(false)
  let bumping: PayoutSender
  let first: `0x${string}`
  let second: `0x${string}`
  try {
    bumping = sender({ broadcast: keeping }, 3, 100)
    let stuck = (await payouts.get(payout.id))!
    await until(async () => {
      await bumping.tick()
      stuck = (await payouts.get(payout.id))!
      return stuck.hashes.length >= 2
    })
    ;[first, second] = stuck.hashes as [`0x${string}`, `0x${string}`]
    expect(stuck).toMatchObject({ state: 'sending', txHash: second })
    // fork A: the replacement is mined, and the payout is included there
    const snapshot = await chain.testClient.snapshot()
    await chain.testClient.mine({ blocks: 1 })
    const included = await passUntil(bumping, payouts, payout.id, (p) => p.state === 'pending')
    expect(included).toMatchObject({ txHash: second })
    // fork B wins: the first signing (same nonce, lower fee) is mined in its place
    await chain.testClient.revert({ id: snapshot })
    await chain.testClient.dropTransaction({ hash: second })
    const firstRaw = broadcast.find((raw) => keccak256(raw) === first)!
    expect(await wallet.broadcast(firstRaw)).toBeNull()
    await chain.testClient.mine({ blocks: 1 })
  } finally {
    await chain.testClient.setAutomine(true)
  }
  expect((await onChain.receipt(first))?.status).toBe('success')
  expect(await onChain.receipt(second)).toBeNull()
  let done: Payout | undefined
  await until(async () => {
    await bumping.tick()
    const now = (await payouts.get(payout.id))!
    if (now.state === 'confirmed' || now.state === 'failed') done = now
    else await chain.testClient.mine({ blocks: 1 })
    return done !== undefined
  })
  // the supplier was paid once, by the first signing; the record must say so
  expect(await transfersFrom(chain, wallet.address, to)).toEqual([{ to, value: 1_700_000n, tx: first }])
  expect(done).toMatchObject({ state: 'confirmed', txHash: first })
  expect(await money(supplierId)).toEqual({ paidOut: 1_700_000, pending: 0, payable: 0 })
}, 60_000)

test('the payout wallet out of ETH: its refused transfer is not re-signed again and again at an ever higher fee', async () => {
  const { supplierId, payout, to } = await payoutOf(1_000_000)
  const eth = await onChain.client.getBalance({ address: wallet.address })
  // signed while the wallet held gas; emptied before the broadcast, so the node refuses the bytes
  let firstRaw: `0x${string}` | undefined
  const broke = sender(
    {},
    1,
    100,
    async (p) => {
      if (firstRaw) return
      firstRaw = p.rawTx!
      await chain.testClient.setBalance({ address: wallet.address, value: 0n })
    },
    200,
  )
  let stuck = (await payouts.get(payout.id))!
  for (let pass = 0; pass < 12; pass++) {
    await broke.tick()
    stuck = (await payouts.get(payout.id))!
    expect(stuck.state).toBe('sending')
  }
  // gas comes back: the transfer goes out
  await chain.testClient.setBalance({ address: wallet.address, value: eth })
  let done: Payout | undefined
  await until(async () => {
    await broke.tick()
    const now = (await payouts.get(payout.id))!
    if (now.state === 'confirmed' || now.state === 'failed') done = now
    return done !== undefined
  })
  expect(done).toMatchObject({ state: 'confirmed' })
  expect(await transfersFrom(chain, wallet.address, to)).toHaveLength(1)
  expect(await money(supplierId)).toEqual({ paidOut: 1_000_000, pending: 0, payable: 0 })
  // the node never held any of these bytes: no replacement was needed, and none may raise the fee
  const mined = await onChain.client.getTransaction({ hash: done!.txHash! })
  const firstTip = parseTransaction(firstRaw!).maxPriorityFeePerGas!
  // at most one replacement, once the gas is back (the first bytes waited past SVC_PAYOUT_BUMP_MS)
  expect(stuck.hashes).toHaveLength(1)
  expect(mined.maxPriorityFeePerGas! <= firstTip + firstTip / 10n + 1n).toBe(true)
}, 60_000)

test('amounts at the edges: the minimum, payable exactly, and one micro past payable', async () => {
  const supplierId = await seedSupplier({ store, keys }, 'active')
  await seedEarnings({ store, keys }, supplierId, 3_000_001)
  await expect(payouts.create(supplierId, 999_999, 'under', 1_000_000)).rejects.toMatchObject({
    code: 'payout_below_minimum',
  })
  const { payout: atMin } = await payouts.create(supplierId, 1_000_000, 'min', 1_000_000)
  await expect(payouts.create(supplierId, 2_000_002, 'over', 1_000_000)).rejects.toMatchObject({
    code: 'payout_exceeds_payable',
  })
  const { payout: rest } = await payouts.create(supplierId, 2_000_001, 'exact', 1_000_000)
  const s = sender({}, 1)
  for (const id of [atMin.id, rest.id]) {
    await until(async () => {
      await s.tick()
      return (await payouts.get(id))!.state === 'confirmed'
    })
  }
  const paid = (await transfersFrom(chain, wallet.address, getAddress(atMin.wallet))).map((t) => t.value)
  expect(paid.sort((a, b) => (a < b ? -1 : 1))).toEqual([1_000_000n, 2_000_001n])
  expect(await money(supplierId)).toEqual({ paidOut: 3_000_001, pending: 0, payable: 0 })
}, 60_000)
