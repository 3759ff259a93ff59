// (d) Many replicas on one Redis: the per-key and per-wallet in-flight caps hold across replicas,
// a key revoked on one replica is refused on every replica at once, and the capacity snapshot is
// the same from each.
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

// Slow buffered answers, so every request of a burst is in flight at once.
const sim = startSim({ port: 0, latencyMs: 3_000 })
const store = createStore(testRedisUrl(), { name: 'chaos-d' })
let cluster: Cluster | undefined
afterAll(async () => {
  await cluster?.stop()
  await sim.stop()
  store.close()
})

/** Fires `perReplica` requests on each replica at once with each key; counts how they ended. */
async function burst(cluster: Cluster, apiKeys: string[], perReplica: number) {
  const requests = cluster.replicas.flatMap((replica) =>
    apiKeys.flatMap((apiKey) => Array.from({ length: perReplica }, () => chat(replica, apiKey, false))),
  )
  const outcomes = await Promise.all(requests)
  const counts: Record<string, number> = {}
  for (const o of outcomes) {
    const label = o.status === 200 ? 'ok' : `${o.status}:${o.error}`
    counts[label] = (counts[label] ?? 0) + 1
  }
  return counts
}

/** The highest in-flight count the account hash shows in `field` while `work` runs. */
async function peakInFlight(
  prefix: string,
  accountId: string,
  field: string,
  work: Promise<unknown>,
): Promise<number> {
  let peak = 0
  let done = false
  void work.finally(() => {
    done = true
  })
  while (!done) {
    peak = Math.max(peak, Number((await store.hget(keyspace(prefix).account(accountId), field)) ?? 0))
    await Bun.sleep(20)
  }
  return peak
}

test('three replicas: caps hold across replicas, a revoke holds everywhere at once, one capacity snapshot', async () => {
  const started = Date.now()
  cluster = await startCluster({
    redisUrl: testRedisUrl(),
    sim,
    replicas: 3,
    env: { SVC_KEY_MAX_IN_FLIGHT: '2', SVC_WALLET_MAX_IN_FLIGHT: '3' },
  })
  await simOffer(cluster, sim, 40)
  await simOffer(cluster, sim, 45)
  const buyer = await fundedBuyer(cluster)

  // Per key: 4 at once on each of 3 replicas with one key, cap 2.
  let keyBurst: Record<string, number> = {}
  const keyPeak = await peakInFlight(
    cluster.prefix,
    buyer.accountId,
    `inflight:${buyer.keyId}`,
    (async () => {
      keyBurst = await burst(cluster!, [buyer.apiKey], 4)
    })(),
  )
  expect(keyBurst).toEqual({ ok: 2, '429:key_concurrency_limit': 10 })
  expect(keyPeak).toBeLessThanOrEqual(2)

  // Per wallet: three keys (each under its own cap of 2), 2 at once each on each replica, cap 3.
  const extra: string[] = []
  for (const name of ['second', 'third']) {
    const minted = await call(cluster.replicas[1]!.url, '/v1/agent/keys', buyer.apiKey, { name })
    extra.push(((await minted.json()) as { apiKey: string }).apiKey)
  }
  let walletBurst: Record<string, number> = {}
  const walletPeak = await peakInFlight(
    cluster.prefix,
    buyer.accountId,
    'inflight',
    (async () => {
      walletBurst = await burst(cluster!, [buyer.apiKey, ...extra], 2)
    })(),
  )
  expect(walletBurst.ok).toBe(3)
  expect(
    walletBurst.ok! +
      (walletBurst['429:buyer_concurrency_limit'] ?? 0) +
      (walletBurst['429:key_concurrency_limit'] ?? 0),
  ).toBe(18)
  expect(walletBurst['429:buyer_concurrency_limit']).toBeGreaterThan(0)
  expect(walletPeak).toBeLessThanOrEqual(3)

  // Revoke on replica 1: refused on all three at once.
  const minted = await call(cluster.replicas[1]!.url, '/v1/agent/keys', buyer.apiKey, { name: 'revoked' })
  const doomed = (await minted.json()) as { apiKey: string; id: string }
  for (const replica of cluster.replicas) {
    expect((await call(replica.url, '/v1/agent/me', doomed.apiKey, undefined, 'GET')).status).toBe(200)
  }
  const revoked = await call(
    cluster.replicas[1]!.url,
    `/v1/agent/keys/${doomed.id}`,
    buyer.apiKey,
    undefined,
    'DELETE',
  )
  expect(revoked.status).toBe(200)
  for (const replica of cluster.replicas) {
    const refused = await chat(replica, doomed.apiKey, false)
    expect(refused.status).toBe(401)
    expect((await call(replica.url, '/v1/agent/me', doomed.apiKey, undefined, 'GET')).status).toBe(401)
  }

  // One capacity snapshot, whichever replica answers.
  const snapshots = await Promise.all(
    cluster.replicas.map(async (r) => (await fetch(`${r.url}/v1/capacity`)).json()),
  )
  expect(snapshots[1]).toEqual(snapshots[0])
  expect(snapshots[2]).toEqual(snapshots[0])

  const settleMs = await settled(store, cluster.prefix, 20_000)
  console.log(
    `(d) key cap 2 across 3 replicas: ${JSON.stringify(keyBurst)} (peak ${keyPeak}); wallet cap 3: ` +
      `${JSON.stringify(walletBurst)} (peak ${walletPeak}); revoke refused on 3/3 at once; ` +
      `capacity snapshot identical on 3/3; settled in ${settleMs} ms; ${Math.round((Date.now() - started) / 1000)} s`,
  )
  const audit = await runAudit(cluster.redisUrl, cluster.prefix)
  expect(audit.output).toContain('every invariant holds')
  expect(audit.code).toBe(0)
}, 120_000)
