// (h) A key's spending limit across three replicas: a burst on one limited key, spread over every
// replica with all of it in flight at once, is admitted only as far as the limit covers the holds;
// the rest is 403 key_limit_exceeded, what the key spent is exactly what its clients were told they
// were charged and never above the limit, and the audit (per key included) holds.
import { afterAll, expect, test } from 'bun:test'
import { keyspace } from '../src/redis/keys.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { testRedisUrl } from '../test/helpers/stack.ts'
import {
  type Cluster,
  call,
  chat,
  fundedBuyer,
  runAudit,
  settled,
  simOffer,
  startCluster,
} from './cluster.ts'

// Slow buffered answers: every request of the burst is in flight at once.
const sim = startSim({ port: 0, latencyMs: 2_000 })
const store = createStore(testRedisUrl(), { name: 'chaos-h' })
let cluster: Cluster | undefined
afterAll(async () => {
  await cluster?.stop()
  await sim.stop()
  store.close()
})

// At 40 cents a request of the burst (max_tokens 64) holds well under 0.0001 USDC.
const LIMIT = '0.000500'
const LIMIT_MICROS = 500

test('three replicas: one limited key is never taken past its limit by a concurrent burst', async () => {
  const started = Date.now()
  cluster = await startCluster({
    redisUrl: testRedisUrl(),
    sim,
    replicas: 3,
    env: { SVC_KEY_MAX_IN_FLIGHT: '200', SVC_WALLET_MAX_IN_FLIGHT: '200' },
  })
  await simOffer(cluster, sim, 40)
  const buyer = await fundedBuyer(cluster)
  const minted = await call(cluster.replicas[2]!.url, '/v1/agent/keys', buyer.apiKey, {
    name: 'agent',
    limitUsdc: LIMIT,
  })
  const key = (await minted.json()) as { apiKey: string; id: string }

  const held = `held:${key.id}`
  const spent = `spent:${key.id}`
  let peak = 0
  let done = false
  const watch = (async () => {
    while (!done) {
      const [h, s] = await store.hmget(keyspace(cluster!.prefix).account(buyer.accountId), held, spent)
      peak = Math.max(peak, Number(h ?? 0) + Number(s ?? 0))
      await Bun.sleep(20)
    }
  })()
  const outcomes = await Promise.all(
    cluster.replicas.flatMap((replica) => Array.from({ length: 20 }, () => chat(replica, key.apiKey, false))),
  )
  done = true
  await watch

  const counts: Record<string, number> = {}
  for (const o of outcomes) {
    const label = o.status === 200 ? 'ok' : `${o.status}:${o.error}`
    counts[label] = (counts[label] ?? 0) + 1
  }
  expect(Object.keys(counts).sort()).toEqual(['403:key_limit_exceeded', 'ok'])
  const charged = outcomes.reduce((sum, o) => sum + (o.ackedCost ?? 0), 0)
  const list = (await (
    await call(cluster.replicas[0]!.url, '/v1/agent/keys', buyer.apiKey, undefined, 'GET')
  ).json()) as {
    activeApiKeys: { id: string; spentUsdc: string; limitRemainingUsdc: string }[]
  }
  const listed = list.activeApiKeys.find((k) => k.id === key.id)!
  expect(Math.round(Number(listed.spentUsdc) * 1e6)).toBe(charged)
  expect(charged).toBeLessThanOrEqual(LIMIT_MICROS)
  expect(peak).toBeLessThanOrEqual(LIMIT_MICROS)

  const settleMs = await settled(store, cluster.prefix, 20_000)
  console.log(
    `(h) one key limited to ${LIMIT} USDC, 60 at once over 3 replicas: ${JSON.stringify(counts)}; ` +
      `spent ${listed.spentUsdc} (= charges acknowledged to clients), peak spent + held ${peak} micro-USDC; ` +
      `settled in ${settleMs} ms; ${Math.round((Date.now() - started) / 1000)} s`,
  )
  const audit = await runAudit(cluster.redisUrl, cluster.prefix)
  expect(audit.output).toContain('every invariant holds')
  expect(audit.code).toBe(0)
}, 120_000)
