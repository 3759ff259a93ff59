// (a) Three replicas under steady buffered + streamed load with random supplier faults; one is
// killed -9 mid-stream. Its leases are reaped by the others, its holds return, and every request
// any client saw end was charged exactly what its client was told: nothing twice, nothing lost.
import { afterAll, expect, test } from 'bun:test'
import { keyspace } from '../src/redis/keys.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { testRedisUrl } from '../test/helpers/stack.ts'
import {
  type Cluster,
  fundedBuyer,
  randomFaults,
  reconcile,
  runAudit,
  setFault,
  settled,
  simOffer,
  startCluster,
  steadyLoad,
} from './cluster.ts'

const sim = startSim({ port: 0, tokensPerSecond: 40, outputTokens: 40 })
const store = createStore(testRedisUrl(), { name: 'chaos-a' })
let cluster: Cluster | undefined
afterAll(async () => {
  await cluster?.stop()
  await sim.stop()
  store.close()
})

async function leasesGone(ids: string[], ms: number): Promise<number> {
  const started = Date.now()
  const leases = keyspace(cluster!.prefix).leases
  while (Date.now() - started < ms) {
    const scores = ids.length ? await store.zmscore(leases, ...ids) : []
    if (scores.every((score) => score === null)) return Date.now() - started
    await Bun.sleep(50)
  }
  throw new Error(`leases open at the kill still there after ${ms} ms`)
}

test('kill -9 one of three replicas mid-stream: leases reaped, holds back, nothing charged twice or lost', async () => {
  const started = Date.now()
  cluster = await startCluster({ redisUrl: testRedisUrl(), sim, replicas: 3 })
  const upstreamKeys = [await simOffer(cluster, sim, 40), await simOffer(cluster, sim, 45)]
  upstreamKeys.push(await simOffer(cluster, sim, 50))
  const buyers = await Promise.all([1, 2, 3, 4].map(() => fundedBuyer(cluster!)))
  const dead: number[] = []
  const live = () => cluster!.replicas.filter((r) => !dead.includes(r.index))
  const load = steadyLoad({ replicas: live, buyers, workers: 8, streamShare: 0.6 })
  const faults = randomFaults(sim, upstreamKeys, 300)

  await Bun.sleep(3_000)
  // Mid-stream: wait until replica 0 has streams under way (admitted, their clear still to come),
  // then kill it without warning: their leases are what the survivors must reap.
  while (load.streamingOn(0) < 2) await Bun.sleep(10)
  const openAtKill = load.openOn(0)
  const leasesAtKill = await store.zrange(keyspace(cluster.prefix).leases, 0, -1)
  const killedAt = Date.now()
  cluster.replicas[0]!.child.kill('SIGKILL')
  dead.push(0)
  await cluster.replicas[0]!.child.exited
  // Every lease open at the kill ends: the survivors' by settling, the dead replica's by reaping.
  const reapedWithinMs = await leasesGone(leasesAtKill, 15_000)
  const injected = faults.stop()
  // Faults a client sees, whatever the random ones happened to hit: the next six requests on the
  // cheapest offer are cut after their first tokens (a streamed one ends stream_incomplete, a
  // buffered one falls forward).
  await setFault(sim, upstreamKeys[0]!, 'truncate', 6)
  const wait = 6_000 - (Date.now() - killedAt)
  if (wait > 0) await Bun.sleep(wait)
  // ... and the load runs on until the six were served (a slow machine serves fewer per second).
  const faultOf = async () =>
    ((await (await fetch(`${sim.url}/sim/keys/${upstreamKeys[0]}`)).json()) as { fault: string | null }).fault
  while ((await faultOf()) !== null) await Bun.sleep(50)
  for (const key of upstreamKeys)
    await fetch(`${sim.url}/sim/keys/${key}`, { method: 'PUT', body: '{"fault":null}' })
  const outcomes = await load.stop()
  const settleMs = await settled(store, cluster.prefix, 20_000)

  const result = await reconcile(store, cluster.prefix, outcomes, (o) => o.replica === 0)
  const onDead = outcomes.filter((o) => o.replica === 0)
  console.log(
    `(a) ${outcomes.length} requests (${outcomes.filter((o) => o.stream).length} streamed, ` +
      `${outcomes.filter((o) => o.ackedCost !== null).length} charged), ${injected} faults injected, ` +
      `1 replica killed with ${openAtKill} open, ${result.states.reaped ?? 0} leases reaped, every lease open ` +
      `at the kill gone ${reapedWithinMs} ms after it (lease 5 s), settled ${settleMs} ms after load, attempts ${JSON.stringify(result.states)}, cleared unheard ${result.unheard.length}, ` +
      `${Math.round((Date.now() - started) / 1000)} s`,
  )
  expect(result.mismatches).toEqual([])
  expect(result.states.admitted ?? 0).toBe(0)
  // The killed replica's open requests were reaped by the survivors (nothing was left holding).
  expect(result.states.reaped ?? 0).toBeGreaterThan(0)
  expect(onDead.some((o) => o.transport !== null)).toBe(true)
  // Only the killed replica can have cleared a request whose client never heard the cost.
  expect(result.unheard.length).toBeLessThanOrEqual(openAtKill)
  expect(result.accountsSpent).toBe(result.totalCharged)
  // Real faults happened and real money moved on the survivors.
  expect(outcomes.filter((o) => o.replica !== 0 && o.ackedCost !== null).length).toBeGreaterThan(20)
  expect(outcomes.some((o) => o.error !== null)).toBe(true)
  // The survivors answered every request in the contract's shape: no 500, no dropped connection.
  const survivors = outcomes.filter((o) => o.replica !== 0)
  expect(
    survivors.filter((o) => o.status === 500 || o.transport !== null || o.error === 'not-error-shape'),
  ).toEqual([])

  const audit = await runAudit(cluster.redisUrl, cluster.prefix)
  expect(audit.output).toContain('every invariant holds')
  expect(audit.code).toBe(0)
}, 120_000)
