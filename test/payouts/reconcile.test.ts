// The sender and reconciler against a real local chain, one sender at a time as the lock allows:
// a sender killed after recording its transaction (before or after broadcasting it) is finished by
// the next one with exactly one transfer on chain; a nonce another transaction took fails the
// payout and makes it payable again, as does a transfer mined and reverted; a sender whose lock was
// taken over broadcasts nothing; a reorg that takes an included transfer out of the chain sends
// the same bytes again.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { createWalletClient, encodeAbiParameters, http, keccak256, numberToHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import type { FundingConfig } from '../../src/config.ts'
import { type FundingChain, fundingChain } from '../../src/funding/chain.ts'
import { auditPayoutsOnChain } from '../../src/payouts/audit.ts'
import type { PayoutSender } from '../../src/payouts/sender.ts'
import type { Payout, PayoutStore } from '../../src/payouts/store.ts'
import { type PayoutWallet, payoutWallet } from '../../src/payouts/wallet.ts'
import type { Keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import { SupplierStore } from '../../src/suppliers/store.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type LaggingRpc, startLaggingRpc } from '../helpers/lagging-rpc.ts'
import {
  type PayoutChain,
  payoutSender,
  payoutWalletParts,
  startPayoutChain,
} from '../helpers/payout-chain.ts'
import { passUntil, payoutOf as payoutFor, supplierMoney, transfersFrom } from '../helpers/payouts.ts'
import { waitFor } from '../helpers/x402.ts'

let opened: PayoutChain<LaggingRpc>
let chain: TestChain
let store: Store
let funding: FundingConfig
let onChain: FundingChain
let keys: Keyspace
let payouts: PayoutStore
let walletKey: `0x${string}`
let wallet: PayoutWallet
let rpc: LaggingRpc
/** The chain and the payout wallet as a sender behind the lagging RPC reads them. */
let laggingChain: FundingChain
let laggingWallet: PayoutWallet
const CONFIRMATIONS = 1

beforeAll(async () => {
  opened = await startPayoutChain({ name: 'svc-test-payouts', rpc: startLaggingRpc })
  ;({ chain, store, rpc } = opened)
  ;({ key: walletKey, funding, onChain, wallet } = await payoutWalletParts(chain, CONFIRMATIONS))
  const behind = { ...funding, chainRpcUrl: rpc.url }
  laggingChain = fundingChain(behind, 20)
  laggingWallet = payoutWallet(walletKey, behind, laggingChain)
})
afterAll(() => opened.stop())
beforeEach(() => {
  rpc.set({})
  ;({ keys, payouts } = opened.fresh())
})

function sender(
  beforeBroadcast?: (payout: Payout) => Promise<void>,
  over: Partial<PayoutWallet> = {},
  confirmations = CONFIRMATIONS,
  bumpAfterMs = 60_000,
) {
  return payoutSender(payouts, { ...wallet, ...over }, onChain, {
    confirmations,
    receiptTimeoutMs: 1_000,
    bumpAfterMs,
    beforeBroadcast,
  })
}

const payoutOf = (amount: number, earned = amount) => payoutFor({ store, keys, payouts }, amount, earned)

const never = () => new Promise<void>(() => {})

/**
 * The payout once `s` has signed and recorded it. A pass that lost its short lock before the
 * record (a busy machine can stall a renewal past it) ends; `s` is ticked again until one records.
 */
async function recorded(id: string, s: PayoutSender): Promise<Payout> {
  for (;;) {
    const payout = (await payouts.get(id))!
    if (payout.rawTx) return payout
    void s.tick()
    await Bun.sleep(10)
  }
}

/** Runs passes of `s` until the payout is final. */
async function finish(s: PayoutSender, id: string): Promise<Payout> {
  for (let i = 0; i < 200; i++) {
    await s.tick()
    const payout = (await payouts.get(id))!
    if (payout.state === 'confirmed' || payout.state === 'failed') return payout
    await Bun.sleep(20)
  }
  throw new Error(`payout ${id} never finished`)
}

const money = (supplierId: string) => supplierMoney({ store, keys }, supplierId)

describe('a sender killed mid-payout', () => {
  test('after broadcast, before its receipt: the next sender reads the receipt; one transfer', async () => {
    const { supplierId, payout, to } = await payoutOf(1_250_000)
    const killed = sender(async (p) => {
      await wallet.broadcast(p.rawTx!)
      await never()
    })
    const signed = await recorded(payout.id, killed)
    killed.stop()
    const done = await finish(sender(), payout.id)
    expect(done).toMatchObject({ state: 'confirmed', txHash: signed.txHash, nonce: signed.nonce })
    expect(await transfersFrom(chain, wallet.address, to)).toEqual([
      { to, value: 1_250_000n, tx: signed.txHash! },
    ])
    expect(await chain.balanceOf(to)).toBe(1_250_000n)
    expect(await money(supplierId)).toEqual({ paidOut: 1_250_000, pending: 0, payable: 0 })
  })

  test('after recording, before broadcasting: the next sender broadcasts the same bytes; one transfer', async () => {
    const { supplierId, payout, to } = await payoutOf(2_000_000, 3_000_000)
    const killed = sender(never)
    const signed = await recorded(payout.id, killed)
    killed.stop()
    expect(await onChain.known(signed.txHash!)).toBe(false)
    const done = await finish(sender(), payout.id)
    expect(done).toMatchObject({ state: 'confirmed', txHash: signed.txHash })
    expect(await transfersFrom(chain, wallet.address, to)).toEqual([
      { to, value: 2_000_000n, tx: signed.txHash! },
    ])
    expect(await money(supplierId)).toEqual({ paidOut: 2_000_000, pending: 0, payable: 1_000_000 })
  })
})

describe('a nonce taken by another transaction', () => {
  test('the payout fails and its amount is payable again; no transfer', async () => {
    const { supplierId, payout, to } = await payoutOf(1_000_000)
    const killed = sender(never)
    const signed = await recorded(payout.id, killed)
    killed.stop()
    // another transaction of the payout wallet takes that nonce first
    const account = privateKeyToAccount(walletKey)
    const other = createWalletClient({
      account,
      chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } },
      transport: http(chain.rpcUrl),
    })
    const hash = await other.sendTransaction({ to: account.address, value: 1n, nonce: signed.nonce! })
    await chain.publicClient.waitForTransactionReceipt({ hash })
    const done = await finish(sender(), payout.id)
    expect(done).toMatchObject({ state: 'failed', error: 'its nonce was used by another transaction' })
    expect(await onChain.receipt(signed.txHash!)).toBeNull()
    expect(await transfersFrom(chain, wallet.address, to)).toEqual([])
    expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 0, payable: 1_000_000 })
  })
})

describe('a transfer that reverts on chain', () => {
  test('mined and reverted: the payout fails and its amount is payable again', async () => {
    const { supplierId, payout, to } = await payoutOf(1_000_000)
    // TestUsdc's balanceOf mapping is its slot 3 (after name, version, totalSupply)
    const slot = keccak256(
      encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [wallet.address, 3n]),
    )
    const held = await chain.balanceOf(wallet.address)
    const read = await chain.publicClient.getStorageAt({ address: chain.usdc, slot })
    expect(BigInt(read!)).toBe(held)
    // signed while the wallet held the USDC; emptied before the broadcast, so it reverts when mined
    const emptied = sender(async () => {
      await chain.testClient.setStorageAt({
        address: chain.usdc,
        index: slot,
        value: numberToHex(0n, { size: 32 }),
      })
    })
    const done = await finish(emptied, payout.id)
    await chain.testClient.setStorageAt({
      address: chain.usdc,
      index: slot,
      value: numberToHex(held, { size: 32 }),
    })
    expect(done.state).toBe('failed')
    expect(done.error).toMatch(/^reverted in block \d+$/)
    const receipt = await onChain.receipt(done.txHash!)
    expect(receipt?.status).toBe('reverted')
    expect(await transfersFrom(chain, wallet.address, to)).toEqual([])
    expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 0, payable: 1_000_000 })
  })
})

describe('a sender whose lock was taken over', () => {
  test('records nothing more and never broadcasts; the new holder finishes the payout', async () => {
    const { payout, to } = await payoutOf(1_500_000)
    let broadcasts = 0
    const countingBroadcast = (raw: `0x${string}`) => {
      broadcasts++
      return wallet.broadcast(raw)
    }
    let resume: () => void = () => {}
    const paused = new Promise<void>((r) => {
      resume = r
    })
    const stale = sender(
      async () => {
        // a pause long enough for the lock to pass to another holder
        await store.set(keys.payoutSenderLock(wallet.address.toLowerCase()), 'another-holder')
        await paused
      },
      { broadcast: countingBroadcast },
    )
    const pass = stale.tick()
    const signed = await recorded(payout.id, stale)
    resume()
    await pass
    expect(broadcasts).toBe(0)
    expect(await onChain.known(signed.txHash!)).toBe(false)
    expect((await payouts.get(payout.id))!.state).toBe('sending')
    await store.del(keys.payoutSenderLock(wallet.address.toLowerCase()))
    const done = await finish(sender(), payout.id)
    expect(done).toMatchObject({ state: 'confirmed', txHash: signed.txHash })
    expect((await transfersFrom(chain, wallet.address, to)).map((t) => t.value)).toEqual([1_500_000n])
  })
})

describe('a reorg', () => {
  test('that takes an included transfer out of the chain: the same bytes go out again; one transfer', async () => {
    const { supplierId, payout, to } = await payoutOf(1_100_000)
    const deep = sender(undefined, {}, 3)
    const snapshot = await chain.testClient.snapshot()
    const included = await passUntil(deep, payouts, payout.id, (p) => p.state === 'pending')
    expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 1_100_000, payable: 0 })
    await chain.testClient.revert({ id: snapshot })
    expect(await onChain.receipt(included.txHash!)).toBeNull()
    // the chain goes on without it, so it can only come back in another block
    await chain.testClient.mine({ blocks: 2 })
    let done: Payout | undefined
    for (let i = 0; i < 50 && !done; i++) {
      await deep.tick()
      const now = (await payouts.get(payout.id))!
      if (now.state === 'confirmed' || now.state === 'failed') done = now
      else await chain.testClient.mine({ blocks: 1 })
    }
    expect(done).toMatchObject({ state: 'confirmed', txHash: included.txHash, nonce: included.nonce })
    expect(done!.blockNumber).not.toBe(included.blockNumber)
    expect(await transfersFrom(chain, wallet.address, to)).toEqual([
      { to, value: 1_100_000n, tx: included.txHash! },
    ])
    expect(await money(supplierId)).toEqual({ paidOut: 1_100_000, pending: 0, payable: 0 })
  })
})

describe('an RPC whose nodes lag', () => {
  test('a receipt read null while the mined nonce is past: the payout waits, is never payable twice', async () => {
    const { supplierId, payout, to } = await payoutOf(1_000_000)
    const behind = payoutSender(payouts, laggingWallet, laggingChain, {
      confirmations: CONFIRMATIONS,
      receiptTimeoutMs: 200,
    })
    // every receipt comes from a node far behind; the mined nonce from one at the head
    rpc.set({ receipts: { blocks: 1_000, share: 1 } })
    const sent = await recorded(payout.id, behind)
    expect(sent.rawTx).not.toBeNull()
    // mined a moment after its broadcast was answered
    expect(await waitFor(() => onChain.receipt(sent.txHash!), Boolean)).not.toBeNull()
    expect(await wallet.nonce('latest')).toBeGreaterThan(sent.nonce!)
    await behind.tick()
    await behind.tick()
    expect((await payouts.get(payout.id))!.state).toBe('sending')
    expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 1_000_000, payable: 0 })
    await expect(payouts.create(supplierId, 1_000_000, `again-${supplierId}`, 1)).rejects.toMatchObject({
      code: 'payout_exceeds_payable',
    })
    expect(rpc.lagged.eth_getTransactionReceipt).toBeGreaterThan(0)
    rpc.set({})
    const done = await finish(behind, payout.id)
    expect(done).toMatchObject({ state: 'confirmed', txHash: sent.txHash })
    expect(await transfersFrom(chain, wallet.address, to)).toEqual([
      { to, value: 1_000_000n, tx: sent.txHash! },
    ])
    expect(await money(supplierId)).toEqual({ paidOut: 1_000_000, pending: 0, payable: 0 })
  })
})

describe('an RPC whose nodes lag', () => {
  test('a pending payout whose receipt a read misses stays pending: the chain still holds its nonce', async () => {
    const { supplierId, payout, to } = await payoutOf(1_000_000)
    const behind = payoutSender(payouts, laggingWallet, laggingChain, {
      confirmations: 3,
      receiptTimeoutMs: 200,
    })
    const included = await passUntil(behind, payouts, payout.id, (p) => p.state === 'pending')
    expect(included).toMatchObject({ blockNumber: expect.any(Number) })
    // every receipt now comes from a node far behind; blocks and nonces from one at the head
    const missed = rpc.lagged.eth_getTransactionReceipt ?? 0
    rpc.set({ receipts: { blocks: 1_000, share: 1 } })
    await behind.tick()
    await behind.tick()
    expect(rpc.lagged.eth_getTransactionReceipt).toBeGreaterThan(missed)
    expect(await payouts.get(payout.id)).toMatchObject({
      state: 'pending',
      txHash: included.txHash,
      blockNumber: included.blockNumber,
    })
    expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 1_000_000, payable: 0 })
    rpc.set({})
    await chain.testClient.mine({ blocks: 2 })
    const done = await finish(behind, payout.id)
    expect(done).toMatchObject({ state: 'confirmed', txHash: included.txHash })
    expect(await transfersFrom(chain, wallet.address, to)).toEqual([
      { to, value: 1_000_000n, tx: included.txHash! },
    ])
    expect(await money(supplierId)).toEqual({ paidOut: 1_000_000, pending: 0, payable: 0 })
  })

  test('nonces read from a node behind: the next payout is signed past the last one, not at its nonce', async () => {
    const a = await payoutOf(1_000_000)
    const behind = payoutSender(payouts, laggingWallet, laggingChain, {
      confirmations: CONFIRMATIONS,
      receiptTimeoutMs: 1_000,
    })
    // a node one block behind: it counts the wallet's transactions of every block but the newest
    await chain.testClient.mine({ blocks: 2 })
    rpc.set({ nonces: { blocks: 1, share: 1 } })
    const first = await finish(behind, a.payout.id)
    expect(first.state).toBe('confirmed')
    expect(await wallet.nonce('latest')).toBe(first.nonce! + 1)
    const b = await payoutOf(2_000_000)
    const second = await finish(behind, b.payout.id)
    expect(rpc.lagged.eth_getTransactionCount).toBeGreaterThan(0)
    expect(second).toMatchObject({ state: 'confirmed', nonce: first.nonce! + 1 })
    expect((await transfersFrom(chain, wallet.address, b.to)).map((t) => t.tx)).toEqual([second.txHash!])
  })
})

describe('a transfer stuck unmined', () => {
  test('is re-signed at its nonce with a higher fee; the one mined confirms it; audit --chain finds it', async () => {
    const { supplierId, payout, to } = await payoutOf(1_300_000)
    // blocks stop coming: the transaction waits in the node's pool as one on a low fee would
    await chain.testClient.setAutomine(false)
    try {
      const bumping = sender(undefined, {}, CONFIRMATIONS, 100)
      let stuck = (await payouts.get(payout.id))!
      for (let pass = 0; pass < 20 && stuck.hashes.length < 2; pass++) {
        await bumping.tick()
        stuck = (await payouts.get(payout.id))!
        expect(stuck.state).toBe('sending')
      }
      expect(stuck.hashes).toHaveLength(2)
      const [first, second] = stuck.hashes
      expect(stuck).toMatchObject({ txHash: second, nonce: expect.any(Number) })
      expect(second).not.toBe(first)
      await chain.testClient.mine({ blocks: 1 })
      const done = await finish(bumping, payout.id)
      expect(done).toMatchObject({ state: 'confirmed', txHash: second, nonce: stuck.nonce })
      expect(done.hashes.slice(0, 2)).toEqual([first!, second!])
      expect(await onChain.receipt(first!)).toBeNull()
      expect(await transfersFrom(chain, wallet.address, to)).toEqual([{ to, value: 1_300_000n, tx: second! }])
      expect(await money(supplierId)).toEqual({ paidOut: 1_300_000, pending: 0, payable: 0 })
      expect(await auditPayoutsOnChain(store, keys, onChain, chain.usdc)).toEqual({
        checked: 1,
        findings: [],
      })
    } finally {
      await chain.testClient.setAutomine(true)
    }
  })
})

describe('a transfer re-signed, its first signing mined after all', () => {
  test('the payout is confirmed at its first hash, the only one on chain; audit --chain matches it', async () => {
    const { supplierId, payout, to } = await payoutOf(1_400_000)
    const broadcast: `0x${string}`[] = []
    const keeping = (raw: `0x${string}`) => {
      broadcast.push(raw)
      return wallet.broadcast(raw)
    }
    await chain.testClient.setAutomine(false)
    try {
      const bumping = sender(undefined, { broadcast: keeping }, CONFIRMATIONS, 100)
      let stuck = (await payouts.get(payout.id))!
      for (let pass = 0; pass < 20 && stuck.hashes.length < 2; pass++) {
        await bumping.tick()
        stuck = (await payouts.get(payout.id))!
      }
      const [first, second] = stuck.hashes
      expect(stuck).toMatchObject({ state: 'sending', txHash: second })
      // the replacement leaves the pool and the first signing is mined in its place
      const firstRaw = broadcast.find((raw) => keccak256(raw) === first)!
      await chain.testClient.dropTransaction({ hash: second! })
      expect(await wallet.broadcast(firstRaw)).toBeNull()
      await chain.testClient.mine({ blocks: 1 })
      const done = await finish(bumping, payout.id)
      expect(done).toMatchObject({ state: 'confirmed', txHash: first, nonce: stuck.nonce })
      expect(done.hashes.slice(0, 2)).toEqual([first!, second!])
      expect(await onChain.receipt(second!)).toBeNull()
      expect(await transfersFrom(chain, wallet.address, to)).toEqual([{ to, value: 1_400_000n, tx: first! }])
      expect(await money(supplierId)).toEqual({ paidOut: 1_400_000, pending: 0, payable: 0 })
      expect(await auditPayoutsOnChain(store, keys, onChain, chain.usdc)).toEqual({
        checked: 1,
        findings: [],
      })
      // a record naming the hash that was never mined is named by the audit
      await store.hset(keys.payout(payout.id), 'txHash', second!)
      const { findings } = await auditPayoutsOnChain(store, keys, onChain, chain.usdc)
      expect(findings).toEqual([
        {
          subject: `payout ${payout.id}`,
          problem: `its mined transactions are [${first}], its record ${second}`,
        },
      ])
    } finally {
      await chain.testClient.setAutomine(true)
    }
  })
})

describe('a supplier suspended after asking', () => {
  test('its unsigned payout is never signed and is payable again', async () => {
    const { supplierId, payout, to } = await payoutOf(1_000_000)
    await new SupplierStore(store, keys).setStatus(supplierId, 'suspended')
    const done = await finish(sender(), payout.id)
    expect(done).toMatchObject({
      state: 'failed',
      error: 'the supplier is suspended',
      txHash: null,
      rawTx: null,
    })
    expect(await transfersFrom(chain, wallet.address, to)).toEqual([])
    expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 0, payable: 1_000_000 })
  })

  test('its payout signed before the suspension is still finished: it may be mined', async () => {
    const { supplierId, payout, to } = await payoutOf(1_000_000)
    const killed = sender(never)
    const signed = await recorded(payout.id, killed)
    killed.stop()
    await new SupplierStore(store, keys).setStatus(supplierId, 'suspended')
    const done = await finish(sender(), payout.id)
    expect(done).toMatchObject({ state: 'confirmed', txHash: signed.txHash })
    expect(await transfersFrom(chain, wallet.address, to)).toEqual([
      { to, value: 1_000_000n, tx: signed.txHash! },
    ])
    expect(await money(supplierId)).toEqual({ paidOut: 1_000_000, pending: 0, payable: 0 })
  })
})
