// A payout whose transfer reverted on chain, behind an RPC that answers the token's logs with a
// transfer the payout never made (a proxy of the test's own in front of the local chain): the
// revert is recognised at depth, the payout failed once and its amount payable again, once; the
// forged log never keeps it pending.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { encodeAbiParameters, type Hex, keccak256, numberToHex, pad } from 'viem'
import { fundingChain } from '../../src/funding/chain.ts'
import { createLogger } from '../../src/logger.ts'
import { PayoutSender } from '../../src/payouts/sender.ts'
import { PayoutStore } from '../../src/payouts/store.ts'
import { payoutWallet } from '../../src/payouts/wallet.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { type LyingRpc, startLyingRpc } from '../helpers/lying-rpc.ts'
import {
  passUntil,
  payoutFunding,
  payoutOf,
  payoutWalletOn,
  supplierMoney,
  transfersFrom,
} from '../helpers/payouts.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'

let chain: TestChain
let store: Store
let keys: Keyspace
let payouts: PayoutStore
let rpc: LyingRpc
const logger = createLogger('silent')
const CONFIRMATIONS = 2
const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef'

beforeAll(async () => {
  chain = await startChain()
  store = createStore(testRedisUrl(), { name: 'svc-test-payouts-forged-logs' })
  rpc = startLyingRpc(chain.rpcUrl)
  keys = keyspace(testPrefix())
  payouts = new PayoutStore(store, keys)
})
afterAll(async () => {
  rpc.stop()
  store.close()
  await chain.stop()
})

test("a reverted payout transfer, the token's logs answered with a forged transfer of it: failed once at depth, its amount payable again once, nothing paid", async () => {
  const { key, address } = await payoutWalletOn(chain)
  const funding = { ...payoutFunding(chain, key, CONFIRMATIONS), chainRpcUrl: rpc.url }
  const onChain = fundingChain(funding, 20)
  // TestUsdc's balanceOf mapping is slot 3: the wallet's USDC is gone by the time it is mined.
  const slot = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [address, 3n]))
  const sender = new PayoutSender(payouts, payoutWallet(key, funding, onChain), onChain, logger, {
    confirmations: CONFIRMATIONS,
    lockTtlMs: 300,
    receiptTimeoutMs: 200,
    bumpAfterMs: 60_000,
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
