// (b) kill -9 redis-server (AOF, appendfsync always) under load, restart it on the same port and
// folder: every cost a client was told before the kill is still charged, requests in flight end in
// the contract's error shape (no 500, no hang, no dropped connection), and the replicas reconnect
// by themselves and serve again.
import { afterAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, type LocalRedis, startLocalRedis } from '../src/redis/local-server.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import {
  type Cluster,
  call,
  fundedBuyer,
  MODEL,
  reconcile,
  runAudit,
  settled,
  simOffer,
  startCluster,
  steadyLoad,
} from './cluster.ts'

const AOF = ['--appendonly', 'yes', '--appendfsync', 'always']
const dir = mkdtempSync(join(tmpdir(), 'svc-chaos-aof-'))
const port = freePort()
let server: LocalRedis = await startLocalRedis(AOF, port, dir)
const sim = startSim({ port: 0, tokensPerSecond: 40, outputTokens: 40 })
let cluster: Cluster | undefined
afterAll(async () => {
  await cluster?.stop()
  await sim.stop()
  await server.stop()
  rmSync(dir, { recursive: true, force: true })
})

async function allReady(cluster: Cluster, ms: number): Promise<number> {
  const started = Date.now()
  for (const replica of cluster.replicas) {
    while ((await fetch(`${replica.url}/readyz`).catch(() => null))?.status !== 200) {
      if (Date.now() - started > ms) throw new Error(`replica ${replica.index} did not reconnect`)
      await Bun.sleep(50)
    }
  }
  return Date.now() - started
}

test('kill -9 an AOF redis-server under load and restart it: acknowledged clears survive, clean errors, reconnect', async () => {
  const started = Date.now()
  cluster = await startCluster({ redisUrl: server.url, sim, replicas: 2 })
  await simOffer(cluster, sim, 40)
  await simOffer(cluster, sim, 45)
  const buyers = await Promise.all([1, 2, 3].map(() => fundedBuyer(cluster!)))
  const load = steadyLoad({ replicas: () => cluster!.replicas, buyers, workers: 12, streamShare: 0.6 })

  await Bun.sleep(4_000)
  const killedAt = Date.now()
  await server.kill()
  // A request begun while Redis is down is refused at once, cleanly (requests already in flight
  // wait for the store to learn their real outcome, so the load alone may begin none then).
  const probe = await call(cluster.replicas[0]!.url, '/v1/chat/completions', buyers[0]!.apiKey, {
    model: MODEL,
    messages: [{ role: 'user', content: 'while down' }],
  })
  const probeCode = ((await probe.json()) as { error?: { code?: string } }).error?.code
  await Bun.sleep(1_500)
  server = await startLocalRedis(AOF, port, dir)
  const restartedAt = Date.now()
  const reconnectMs = await allReady(cluster, 15_000)
  await Bun.sleep(4_000)
  const outcomes = await load.stop()
  const store = createStore(server.url, { name: 'chaos-b' })
  try {
    const settleMs = await settled(store, cluster.prefix, 20_000)
    // Only a request in flight at the kill may have been cleared (fsynced) without its client
    // hearing the cost: the reply died with the server.
    const atKill = (o: (typeof outcomes)[number]) => o.startedAt <= killedAt && o.endedAt >= killedAt
    const result = await reconcile(store, cluster.prefix, outcomes, atKill)
    const acked = outcomes.filter((o) => o.ackedCost !== null)
    const ackedBeforeKill = acked.filter((o) => o.endedAt < killedAt)
    const ackedSum = acked.reduce((sum, o) => sum + o.ackedCost!, 0)
    const unheardSum = result.unheard.reduce((sum, [, charged]) => sum + charged, 0)
    const during = outcomes.filter((o) => o.endedAt >= killedAt && o.startedAt <= restartedAt)
    const served = outcomes.filter((o) => o.startedAt > restartedAt + reconnectMs && o.ackedCost !== null)
    console.log(
      `(b) ${outcomes.length} requests, ${ackedBeforeKill.length} charged before the kill, ` +
        `${outcomes.filter(atKill).length} in flight at the kill, ${during.length} ended while down ` +
        `(${JSON.stringify(countBy(during.map((o) => `${o.status}:${o.error ?? 'ok'}`)))}), ` +
        `reconnected ${reconnectMs} ms after restart, ${served.length} charged after, ` +
        `attempts ${JSON.stringify(result.states)}, cleared unheard ${result.unheard.length}, ` +
        `settled in ${settleMs} ms, ${Math.round((Date.now() - started) / 1000)} s`,
    )
    expect(ackedBeforeKill.length).toBeGreaterThan(10)
    expect(result.mismatches).toEqual([])
    expect(result.accountsSpent).toBe(ackedSum + unheardSum)
    expect(result.unheard.length).toBeLessThanOrEqual(outcomes.filter(atKill).length)
    // Clean errors only: the contract's shape, never a 500, a dropped connection or a timeout.
    expect(
      outcomes.filter((o) => o.status === 500 || o.transport !== null || o.error === 'not-error-shape'),
    ).toEqual([])
    expect([probe.status, probeCode]).toEqual([503, 'store_unavailable'])
    expect(served.length).toBeGreaterThan(5)

    const audit = await runAudit(server.url, cluster.prefix)
    expect(audit.output).toContain('every invariant holds')
    expect(audit.code).toBe(0)
  } finally {
    store.close()
  }
}, 120_000)

function countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1
  return counts
}
