// The payout sender behind an RPC that lies (a proxy of the test's own in front of the local
// chain): nothing it says moves money unchecked. A receipt for the payout's hash showing another
// transfer never confirms it; an RPC answering from another chain never fails it (its transfer
// may still be mined on the payout chain, and the amount would be paid twice); a pending nonce
// answered too high never makes the sender skip a nonce (a gap no transaction fills).
import { afterAll, beforeAll, beforeEach, expect, test } from 'bun:test'
import { type Address, createWalletClient, type Hex, http, keccak256, numberToHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import type { PayoutSender } from '../../src/payouts/sender.ts'
import type { Payout, PayoutStore } from '../../src/payouts/store.ts'
import type { Keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { type LyingRpc, startLyingRpc } from '../helpers/lying-rpc.ts'
import {
  type PayoutChain,
  payoutSender,
  payoutWalletParts,
  startPayoutChain,
} from '../helpers/payout-chain.ts'
import { passUntil, payoutOf as payoutFor, supplierMoney, transfersFrom } from '../helpers/payouts.ts'
import { until } from '../helpers/wait.ts'

let opened: PayoutChain<LyingRpc>
let chain: TestChain
let store: Store
let keys: Keyspace
let payouts: PayoutStore
let rpc: LyingRpc

beforeAll(async () => {
  opened = await startPayoutChain({ name: 'svc-test-payouts-lying', rpc: startLyingRpc })
  ;({ chain, store, rpc } = opened)
})
afterAll(() => opened.stop())
beforeEach(() => {
  rpc.route(chain.rpcUrl)
  rpc.lie(null)
  ;({ keys, payouts } = opened.fresh())
})

/** A fresh payout wallet and its sender, reading the chain through the lying RPC. */
async function senderBehindRpc(confirmations = 1) {
  const { key, address, onChain, wallet } = await payoutWalletParts(chain, confirmations, { rpcUrl: rpc.url })
  const sender = payoutSender(payouts, wallet, onChain, { confirmations, receiptTimeoutMs: 200 })
  return { key, address, sender }
}

const payoutOf = (amount: number) => payoutFor({ store, keys, payouts }, amount)
const money = (supplierId: string) => supplierMoney({ store, keys }, supplierId)

async function finish(s: PayoutSender, id: string): Promise<Payout> {
  let done: Payout | undefined
  await until(async () => {
    await s.tick()
    const now = (await payouts.get(id))!
    if (now.state === 'confirmed' || now.state === 'failed') done = now
    else if (now.state === 'pending') await chain.testClient.mine({ blocks: 1 })
    return done !== undefined
  })
  return done!
}

/** Finished by the sender: confirmed (by `txHash` when given), one transfer of its amount on chain, paid out once. */
async function paidOnce(
  s: PayoutSender,
  p: { payout: Payout; supplierId: string; to: Address },
  address: Address,
  amount: number,
  txHash?: Hex | null,
): Promise<Payout> {
  const done = await finish(s, p.payout.id)
  expect(done).toMatchObject(txHash === undefined ? { state: 'confirmed' } : { state: 'confirmed', txHash })
  expect(await transfersFrom(chain, address, p.to)).toEqual([
    { to: p.to, value: BigInt(amount), tx: done.txHash! },
  ])
  expect(await money(p.supplierId)).toEqual({ paidOut: amount, pending: 0, payable: 0 })
  return done
}

/** Another network's node, where the same key has sent transactions of its own (its nonce is past). */
async function chainElsewhere(key: Hex, address: Address): Promise<TestChain> {
  const other = await startChain(CHAIN_ELSEWHERE)
  await other.testClient.setBalance({ address, value: 10n ** 19n })
  const elsewhere = createWalletClient({
    account: privateKeyToAccount(key),
    chain: { ...baseSepolia, id: CHAIN_ELSEWHERE, rpcUrls: { default: { http: [other.rpcUrl] } } },
    transport: http(other.rpcUrl),
  })
  for (let i = 0; i < 3; i++) {
    const hash = await elsewhere.sendTransaction({ to: address, value: 1n })
    await other.publicClient.waitForTransactionReceipt({ hash })
  }
  await other.testClient.mine({ blocks: 20 })
  return other
}

const rawReceipt = async (hash: Hex) =>
  (await (
    await fetch(chain.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_getTransactionReceipt', params: [hash] }),
    })
  ).json()) as { result: Record<string, unknown> }

test("a receipt for the payout's hash holding another transfer: never confirmed on its word; paid once when the RPC tells the truth", async () => {
  const { address, sender } = await senderBehindRpc()
  // a real transfer of the wallet, to another supplier and of another amount
  const earlier = await payoutOf(2_000_000)
  const paid = await finish(sender, earlier.payout.id)
  expect(paid.state).toBe('confirmed')
  const { result: otherReceipt } = await rawReceipt(paid.txHash!)

  const { supplierId, payout, to } = await payoutOf(1_000_000)
  // the RPC keeps the payout's bytes from the chain and answers their hash with that receipt
  const swallowed = new Set<string>()
  let lies = 0
  rpc.lie(async (call, real) => {
    if (call.method === 'eth_sendRawTransaction') {
      const hash = keccak256(call.params![0] as Hex)
      swallowed.add(hash)
      return { result: hash }
    }
    const hash = String(call.params?.[0])
    if (call.method !== 'eth_getTransactionReceipt' || !swallowed.has(hash)) return real()
    lies++
    return { result: { ...otherReceipt, transactionHash: hash } }
  })
  await passUntil(sender, payouts, payout.id, async (p) => {
    await chain.testClient.mine({ blocks: 1 })
    return p.state !== 'sending' || lies >= 4
  })
  const signed = (await payouts.get(payout.id))!
  expect(signed).toMatchObject({ state: 'sending', txHash: expect.any(String) })
  expect(await transfersFrom(chain, address, to)).toEqual([])
  expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 1_000_000, payable: 0 })

  rpc.lie(null)
  await paidOnce(sender, { payout, supplierId, to }, address, 1_000_000, signed.txHash)
}, 60_000)

test('an RPC answering from another chain: the payout is never failed on its word; back on the payout chain it is paid once', async () => {
  const { key, address, sender } = await senderBehindRpc()
  const other = await chainElsewhere(key, address)
  try {
    const { supplierId, payout, to } = await payoutOf(1_000_000)
    // the payout chain holds the transfer in its pool, unmined
    await chain.testClient.setAutomine(false)
    let sent: Payout
    try {
      sent = await passUntil(sender, payouts, payout.id, (p) => p.rawTx !== null)
      await until(() =>
        chain.publicClient.getTransactionCount({ address, blockTag: 'pending' }).then((n) => n > sent.nonce!),
      )
      rpc.route(other.rpcUrl)
      const before = rpc.calls.eth_getTransactionCount ?? 0
      await sender.tick()
      await sender.tick()
      expect((await payouts.get(payout.id))!.state).toBe('sending')
      expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 1_000_000, payable: 0 })
      expect(rpc.calls.eth_getTransactionCount ?? 0).toBe(before)
      rpc.route(chain.rpcUrl)
    } finally {
      await chain.testClient.setAutomine(true)
    }
    await chain.testClient.mine({ blocks: 1 })
    await paidOnce(sender, { payout, supplierId, to }, address, 1_000_000, sent.txHash)
  } finally {
    await other.stop()
  }
}, 60_000)

test('an RPC switching to another chain mid-pass, after the pass read its chain id: the payout is never failed on its word; back on the payout chain it is paid once', async () => {
  const { key, address, sender } = await senderBehindRpc()
  const other = await chainElsewhere(key, address)
  try {
    const { supplierId, payout, to } = await payoutOf(1_000_000)
    await chain.testClient.setAutomine(false)
    let sent: Payout
    try {
      sent = await passUntil(sender, payouts, payout.id, (p) => p.rawTx !== null)
      // The balancer answers the pass's chain id from the payout chain, then moves to the other.
      let switched = false
      rpc.lie(async (call, real) => {
        const answer = await real()
        if (call.method === 'eth_chainId' && !switched) {
          switched = true
          rpc.route(other.rpcUrl)
        }
        return answer
      })
      await sender.tick()
      expect(switched).toBe(true)
      expect((await payouts.get(payout.id))!.state).toBe('sending')
      expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 1_000_000, payable: 0 })
      rpc.lie(null)
      rpc.route(chain.rpcUrl)
    } finally {
      await chain.testClient.setAutomine(true)
    }
    await chain.testClient.mine({ blocks: 1 })
    await paidOnce(sender, { payout, supplierId, to }, address, 1_000_000, sent.txHash)
  } finally {
    await other.stop()
  }
}, 60_000)

test('an RPC switching to another chain mid-pass, before a payout is signed: no nonce of that chain is signed at; back on the payout chain it is paid at the next nonce', async () => {
  const { key, address, sender } = await senderBehindRpc()
  const mined = await chain.publicClient.getTransactionCount({ address })
  const other = await chainElsewhere(key, address)
  try {
    // There the wallet holds USDC too: the transfer would not revert, so it would be signed.
    await other.mint(address, 1_000_000_000n)
    const { supplierId, payout, to } = await payoutOf(1_300_000)
    // The balancer answers the pass's chain id from the payout chain, then moves to the other. Its
    // nodes fill no transaction (eth_fillTransaction, whose answer would name their chain): many
    // providers' do not.
    let switched = false
    rpc.lie(async (call, real) => {
      if (call.method === 'eth_fillTransaction')
        return {
          error: { code: -32_601, message: `the method ${call.method} does not exist/is not available` },
        }
      const answer = await real()
      if (call.method === 'eth_chainId' && !switched) {
        switched = true
        rpc.route(other.rpcUrl)
      }
      return answer
    })
    await sender.tick()
    expect(switched).toBe(true)
    // Signed at the other chain's count, it would leave a gap on the payout chain nothing fills.
    expect((await payouts.get(payout.id))!).toMatchObject({ state: 'sending', nonce: null, rawTx: null })
    expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 1_300_000, payable: 0 })

    rpc.lie(null)
    rpc.route(chain.rpcUrl)
    const done = await finish(sender, payout.id)
    expect(done).toMatchObject({ state: 'confirmed', nonce: mined })
    expect(await transfersFrom(chain, address, to)).toEqual([{ to, value: 1_300_000n, tx: done.txHash! }])
    expect(await money(supplierId)).toEqual({ paidOut: 1_300_000, pending: 0, payable: 0 })
  } finally {
    await other.stop()
  }
}, 60_000)

test('a receipt forged to say the payout reverted, block and confirmations real: never failed while the token logged its transfer; confirmed once the RPC tells the truth', async () => {
  const { address, sender } = await senderBehindRpc()
  const { supplierId, payout, to } = await payoutOf(1_400_000)
  let forged = 0
  rpc.lie(async (call, real) => {
    const answer = await real()
    const receipt = answer.result as Record<string, unknown> | null | undefined
    if (call.method !== 'eth_getTransactionReceipt' || !receipt) return answer
    const signed = await payouts.get(payout.id)
    if (!signed?.hashes.includes(String(call.params?.[0]) as Hex)) return answer
    forged++
    return { result: { ...receipt, status: '0x0', logs: [] } }
  })
  await passUntil(sender, payouts, payout.id, async (p) => {
    await chain.testClient.mine({ blocks: 1 })
    return p.state === 'failed' || forged >= 6
  })
  // Failed, its amount would be payable again: paid twice.
  expect((await payouts.get(payout.id))!.state).toBe('sending')
  expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 1_400_000, payable: 0 })

  rpc.lie(null)
  await paidOnce(sender, { payout, supplierId, to }, address, 1_400_000)
}, 60_000)

test('a receipt whose block cannot be read back: the payout is kept and read again next pass; paid once when the block answers', async () => {
  const { address, sender } = await senderBehindRpc()
  const { supplierId, payout, to } = await payoutOf(1_100_000)
  // The receipt answers; its block, read again by number, does not (a node that has not got it).
  let receiptBlock: string | undefined
  let refused = 0
  rpc.lie(async (call, real) => {
    const answer = await real()
    if (call.method === 'eth_getTransactionReceipt' && answer.result)
      receiptBlock = (answer.result as { blockNumber: string }).blockNumber
    if (call.method !== 'eth_getBlockByNumber' || call.params?.[0] !== receiptBlock) return answer
    refused++
    return { result: null }
  })
  await passUntil(sender, payouts, payout.id, async (p) => {
    await chain.testClient.mine({ blocks: 1 })
    return p.state !== 'sending' || refused >= 4
  })
  expect((await payouts.get(payout.id))!).toMatchObject({ state: 'sending', txHash: expect.any(String) })
  expect(await money(supplierId)).toEqual({ paidOut: 0, pending: 1_100_000, payable: 0 })

  rpc.lie(null)
  await paidOnce(sender, { payout, supplierId, to }, address, 1_100_000)
}, 60_000)

test("a pending nonce answered past the wallet's transactions: no nonce is skipped; this payout and the next are paid", async () => {
  const { address, sender } = await senderBehindRpc()
  const mined = await chain.publicClient.getTransactionCount({ address })
  // one pending count from a pool holding a transaction of the wallet that was dropped since
  let ahead = true
  rpc.lie(async (call, real) => {
    const answer = await real()
    if (!ahead || call.method !== 'eth_getTransactionCount' || call.params?.[1] !== 'pending') return answer
    ahead = false
    return { result: numberToHex(BigInt(answer.result as Hex) + 1n) }
  })
  const first = await payoutOf(1_000_000)
  const paid = await finish(sender, first.payout.id)
  expect(paid).toMatchObject({ state: 'confirmed', nonce: mined })
  const second = await payoutOf(1_500_000)
  expect(await finish(sender, second.payout.id)).toMatchObject({ state: 'confirmed', nonce: mined + 1 })
  expect(await transfersFrom(chain, address)).toEqual([
    { to: first.to, value: 1_000_000n, tx: paid.txHash! },
    { to: second.to, value: 1_500_000n, tx: expect.any(String) },
  ])
  expect(await money(first.supplierId)).toEqual({ paidOut: 1_000_000, pending: 0, payable: 0 })
}, 60_000)

test('a broadcast the node took but whose answer timed out: the payout is followed from the chain and paid once', async () => {
  const { address, sender } = await senderBehindRpc()
  let timedOut = 0
  rpc.lie(async (call, real) => {
    const answer = await real()
    if (call.method !== 'eth_sendRawTransaction') return answer
    timedOut++
    return { error: { code: -32_000, message: 'request timed out' } }
  })
  const { supplierId, payout, to } = await payoutOf(1_200_000)
  await paidOnce(sender, { payout, supplierId, to }, address, 1_200_000)
  expect(timedOut).toBeGreaterThan(0)
}, 60_000)

const CHAIN_ELSEWHERE = 31_337
