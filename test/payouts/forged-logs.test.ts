// A payout whose transfer reverted on chain, behind an RPC that answers the token's logs with a
// transfer the payout never made (a proxy of the test's own in front of the local chain): the
// revert is recognised at depth, the payout failed once and its amount payable again, once; the
// forged log never keeps it pending.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { encodeAbiParameters, type Hex, keccak256, numberToHex, pad } from 'viem'
import type { PayoutStore } from '../../src/payouts/store.ts'
import type { Keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type LyingRpc, startLyingRpc } from '../helpers/lying-rpc.ts'
import {
  type PayoutChain,
  payoutSender,
  payoutWalletParts,
  startPayoutChain,
} from '../helpers/payout-chain.ts'
import { passUntil, payoutOf, supplierMoney, transfersFrom } from '../helpers/payouts.ts'

let opened: PayoutChain<LyingRpc>
let chain: TestChain
let store: Store
let keys: Keyspace
let payouts: PayoutStore
let rpc: LyingRpc
const CONFIRMATIONS = 2
const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef'

beforeAll(async () => {
  opened = await startPayoutChain({ name: 'svc-test-payouts-forged-logs', rpc: startLyingRpc })
  ;({ chain, store, rpc } = opened)
  ;({ keys, payouts } = opened.fresh())
})
afterAll(() => opened.stop())

test("a reverted payout transfer, the token's logs answered with a forged transfer of it: failed once at depth, its amount payable again once, nothing paid", async () => {
  const { address, onChain, wallet } = await payoutWalletParts(chain, CONFIRMATIONS, { rpcUrl: rpc.url })
  // TestUsdc's balanceOf mapping is slot 3: the wallet's USDC is gone by the time it is mined.
  const slot = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [address, 3n]))
  const sender = payoutSender(payouts, wallet, onChain, {
    confirmations: CONFIRMATIONS,
    receiptTimeoutMs: 200,
    beforeBroadcast: async () => {
      await chain.testClient.setStorageAt({
        address: chain.usdc,
        index: slot,
        value: numberToHex(0n, { size: 32 }),
      })
    },
  })
  const { supplierId, payout, to } = await payoutOf({ store, keys, payouts }, 1_000_000)

  // Every log query is answered with the payout's transfer, in its real block, as if it had paid.
  let forged = 0
  rpc.lie(async (call, real) => {
    const answer = await real()
    if (call.method !== 'eth_getLogs') return answer
    const signed = await payouts.get(payout.id)
    const receipt = signed?.txHash
      ? await chain.publicClient.getTransactionReceipt({ hash: signed.txHash as Hex }).catch(() => null)
      : null
    if (!receipt) return answer
    forged++
    const log = {
      address: chain.usdc,
      topics: [TRANSFER_TOPIC, pad(address), pad(to)],
      data: numberToHex(1_000_000n, { size: 32 }),
      blockNumber: numberToHex(receipt.blockNumber),
      blockHash: receipt.blockHash,
      transactionHash: receipt.transactionHash,
      transactionIndex: numberToHex(receipt.transactionIndex),
      logIndex: '0x0',
      removed: false,
    }
    return { result: [...((answer.result as unknown[]) ?? []), log] }
  })
  const done = await passUntil(sender, payouts, payout.id, async (p) => {
    if (p.state === 'sending') await chain.testClient.mine({ blocks: 1 })
    return p.state === 'failed' || forged >= 8
  })
  const receipt = await chain.publicClient.getTransactionReceipt({ hash: done.txHash as Hex })
  expect(receipt.status).toBe('reverted')
  expect(forged).toBeGreaterThan(0)
  expect(done).toMatchObject({ state: 'failed', error: expect.stringContaining('reverted') })
  expect(await transfersFrom(chain, address, to)).toEqual([])
  expect(await supplierMoney({ store, keys }, supplierId)).toEqual({
    paidOut: 0,
    pending: 0,
    payable: 1_000_000,
  })

  // Further passes on the same word change nothing: released once.
  await chain.testClient.mine({ blocks: 2 })
  await sender.tick()
  await sender.tick()
  expect((await payouts.get(payout.id))!.state).toBe('failed')
  expect(await supplierMoney({ store, keys }, supplierId)).toEqual({
    paidOut: 0,
    pending: 0,
    payable: 1_000_000,
  })
}, 60_000)
