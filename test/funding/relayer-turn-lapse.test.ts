// Replicas sharing one relayer key (src/funding/sender-lock.ts, src/funding/relayer.ts): a send
// stuck on a slow RPC longer than the key's turn lives must not let another replica take the turn
// and sign at the same nonce (two transactions at one nonce: one of the two payments is never
// mined, though both were answered as sent). Real anvil, real Redis; the slow RPC is a proxy of
// the test's own that holds gas estimates while told to.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createPublicClient, type Hex, http, type PublicClient } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { baseSepolia } from 'viem/chains'
import { NotSent, Relayer } from '../../src/funding/relayer.ts'
import { SenderTurns } from '../../src/funding/sender-lock.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { type MarketFixture, marketFixture } from '../helpers/market.ts'
import { until } from '../helpers/wait.ts'

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

/** A proxy that holds each gas estimate (eth_fillTransaction, eth_estimateGas) until `release()` while `hold` is on. */
function slowRpc(upstream: string) {
  let waiting: (() => void)[] = []
  const state = { hold: false, held: 0 }
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(request) {
      const body = await request.text()
      if (state.hold && /eth_fillTransaction|eth_estimateGas/.test(body)) {
        state.held++
        await new Promise<void>((resolve) => waiting.push(resolve))
      }
      const answer = await fetch(upstream, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      })
      return new Response(await answer.text(), { headers: { 'content-type': 'application/json' } })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    state,
    release() {
      state.hold = false
      for (const resolve of waiting) resolve()
      waiting = []
    },
    stop: () => server.stop(true),
  }
}

function replica(key: Hex, url: string): Relayer {
  const viemChain = { ...baseSepolia, rpcUrls: { default: { http: [url] } } }
  const client = createPublicClient({
    chain: viemChain,
    transport: http(url, { timeout: 60_000 }),
    cacheTime: 0,
  })
  return new Relayer(key, client as PublicClient, viemChain, url)
}

test("a send slower than the turn's life keeps it: no second sender at its nonce", async () => {
  const key = generatePrivateKey()
  const address = privateKeyToAccount(key).address
  await chain.testClient.setBalance({ address, value: 10n ** 18n })
  const slow = slowRpc(chain.rpcUrl)
  const a = replica(key, slow.url)
  const b = replica(key, chain.rpcUrl)
  // The turn lives 300 ms here (30 s in production): the slow send outlives it either way.
  const turnsA = new SenderTurns(fx.store, fx.keys, address, 5_000, 300)
  const turnsB = new SenderTurns(fx.store, fx.keys, address, 5_000, 300)
  const lock = fx.keys.payoutSenderLock(address.toLowerCase())
  const to = privateKeyToAccount(generatePrivateKey()).address
  try {
    slow.state.hold = true
    const first = a
      .send({ to, data: '0x' }, async () => {}, turnsA)
      .then(
        (hash) => ({ hash }),
        (error: Error) => ({ error }),
      )
    await until(() => slow.state.held === 1)
    // Well past the turn's life while A's gas estimate hangs.
    const taken = (await fx.store.pttl(lock)) + Date.now()
    await until(() => Date.now() > taken + 600)
    const second = b
      .send({ to, data: '0x' }, async () => {}, turnsB)
      .then(
        (hash) => ({ hash }),
        (error: Error) => ({ error }),
      )
    // B is either sending now (the turn was lost) or waiting for it; let A finish.
    await until(
      async () => (await chain.publicClient.getTransactionCount({ address })) === 1 || slow.state.held === 1,
    )
    slow.release()
    const results = await Promise.all([first, second])
    const sent = results.flatMap((r) => ('hash' in r ? [r.hash] : []))
    // Refused unsent is allowed (nothing recorded); a hash answered as sent must be mined.
    for (const r of results) if ('error' in r) expect(r.error).toBeInstanceOf(NotSent)
    const receipts = await Promise.all(
      sent.map((hash) =>
        chain.publicClient.waitForTransactionReceipt({ hash, timeout: 10_000 }).catch(() => null),
      ),
    )
    expect(receipts.map((receipt) => receipt?.status ?? 'never mined')).toEqual(sent.map(() => 'success'))
  } finally {
    slow.release()
    slow.stop()
  }
}, 60_000)
