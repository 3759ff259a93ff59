// One relayer key in every replica's config: two relayers (two replicas, each with its own queue
// and nonce count) send at once through an RPC whose pending counts lag now and then. Each send
// takes the key's turn in Redis and a nonce above the last one any of them sent, so every
// transaction is mined, none at a nonce another took.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createPublicClient, type Hex, http, type PublicClient } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { Relayer } from '../../src/funding/relayer.ts'
import { SenderTurns } from '../../src/funding/sender-lock.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { type LaggingRpc, startLaggingRpc } from '../helpers/lagging-rpc.ts'
import { type MarketFixture, marketFixture } from '../helpers/market.ts'

let chain: TestChain
let rpc: LaggingRpc
let fx: MarketFixture

beforeAll(async () => {
  chain = await startChain()
  rpc = startLaggingRpc(chain.rpcUrl, 7)
  fx = marketFixture()
}, 30_000)
afterAll(async () => {
  fx.close()
  rpc.stop()
  await chain.stop()
})

function replica(key: Hex): Relayer {
  const viemChain = { ...baseSepolia, rpcUrls: { default: { http: [rpc.url] } } }
  const client = createPublicClient({ chain: viemChain, transport: http(rpc.url), cacheTime: 0 })
  return new Relayer(key, client as PublicClient, viemChain, rpc.url)
}

test('two replicas on one relayer key: every send mined, each at a nonce of its own', async () => {
  const key = generatePrivateKey()
  const address = privateKeyToAccount(key).address
  await chain.testClient.setBalance({ address, value: 10n ** 18n })
  const [a, b] = [replica(key), replica(key)]
  const turns = new SenderTurns(fx.store, fx.keys, address)
  // A pending count read from a node a block behind, for half the reads.
  rpc.set({ nonces: { blocks: 1, share: 0.5 } })
  const to = privateKeyToAccount(generatePrivateKey()).address
  const sends: Promise<Hex>[] = []
  for (let i = 0; i < 4; i++) {
    for (const relayer of [a, b]) sends.push(relayer.send({ to, data: '0x' }, async () => {}, turns))
  }
  const hashes = await Promise.all(sends)
  rpc.set({})
  const mined = await Promise.all(
    hashes.map((hash) => chain.publicClient.waitForTransactionReceipt({ hash, timeout: 20_000 })),
  )
  expect(mined.map((receipt) => receipt.status)).toEqual(hashes.map(() => 'success'))
  const nonces = await Promise.all(
    hashes.map(async (hash) => (await chain.publicClient.getTransaction({ hash })).nonce),
  )
  expect(new Set(nonces).size).toBe(8)
  expect(await chain.publicClient.getTransactionCount({ address })).toBe(8)
  // The turn is given back after each send: nothing left holding the key.
  expect(await fx.store.get(fx.keys.payoutSenderLock(address.toLowerCase()))).toBeNull()
}, 60_000)
