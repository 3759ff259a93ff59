// The relayer keeps the signed bytes of its last sends (src/funding/sender-lock.ts), to broadcast a
// dropped one again. A broadcast whose answer is lost (the node took it) is never noted as sent, so
// the send 64 nonces on never meets its own: what is kept stays the last 64 sends whatever was
// missed, under traffic that keeps the key alive for good. Real anvil, real Redis; the lossy RPC is
// a proxy of the test's own.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createPublicClient, type Hex, http, keccak256, type PublicClient } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { Relayer } from '../../src/funding/relayer.ts'
import { SenderTurns } from '../../src/funding/sender-lock.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { type MarketFixture, marketFixture } from '../helpers/market.ts'

let chain: TestChain
let fx: MarketFixture

beforeAll(async () => {
  chain = await startChain()
  fx = marketFixture()
}, 30_000)
afterAll(async () => {
  fx.close()
  await chain.stop()
})

/** A node that takes the broadcasts of the nonces in `lose` and loses its answer to them. */
function lossyRpc(upstream: string, lose: Set<number>) {
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const body = await request.text()
      const answer = await fetch(upstream, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      })
      const text = await answer.text()
      const call = JSON.parse(body) as { method?: string; params?: unknown[] }
      if (call.method === 'eth_sendRawTransaction') {
        const hash = keccak256(call.params![0] as Hex)
        const tx = await chain.publicClient.getTransaction({ hash })
        if (lose.has(tx.nonce)) return new Response('bad gateway', { status: 502 })
      }
      return new Response(text, { headers: { 'content-type': 'application/json' } })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) }
}

test('the bytes kept are those of the last 64 sends, however many broadcasts went unanswered', async () => {
  const key = generatePrivateKey()
  const address = privateKeyToAccount(key).address
  await chain.testClient.setBalance({ address, value: 10n ** 18n })
  const rpc = lossyRpc(chain.rpcUrl, new Set([64, 65]))
  const viemChain = { ...baseSepolia, rpcUrls: { default: { http: [rpc.url] } } }
  const client = createPublicClient({
    chain: viemChain,
    transport: http(rpc.url, { retryCount: 0 }),
    cacheTime: 0,
  })
  const relayer = new Relayer(key, client as PublicClient, viemChain, rpc.url)
  const turns = new SenderTurns(fx.store, fx.keys, address)
  const to = privateKeyToAccount(generatePrivateKey()).address
  const hashes: Hex[] = []
  try {
    for (let i = 0; i < 131; i++) hashes.push(await relayer.send({ to, data: '0x' }, async () => {}, turns))
  } finally {
    rpc.stop()
  }
  // Every send was mined, the unanswered two included, each at its own nonce.
  expect(await chain.publicClient.getTransactionCount({ address })).toBe(131)
  const kept = await fx.store.hgetall(fx.keys.relayerSent(address.toLowerCase()))
  const nonces = Object.keys(kept)
    .map(Number)
    .sort((a, b) => a - b)
  expect(nonces).toEqual(Array.from({ length: 64 }, (_, i) => 67 + i))
  expect(kept['130'] && keccak256(kept['130'] as Hex)).toBe(hashes[130]!)
}, 60_000)
