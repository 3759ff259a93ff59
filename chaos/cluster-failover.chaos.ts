// (g) A Redis Cluster master killed -9 under load: three masters, each with a replica, and the
// market on one slot (layout one-slot) served by two gateway replicas as `serve` processes given
// the Cluster's URL. The master holding the market's slot is killed mid-load; its replica takes
// over. Requests during the failover end 200 or 503 `store_unavailable` (never a 500, never a
// connection dropped), load goes on after it, the real `svc-gateway audit` finds nothing, and every
// cost a client was told is what Redis charged, apart from clears the kill took before they
// reached the replica (asynchronous replication: counted and reported, see RELIABILITY.md).
import { afterAll, expect, test } from 'bun:test'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { until } from '../test/helpers/wait.ts'
import {
  type Cluster,
  fundedBuyer,
  type Outcome,
  reconcile,
  runAudit,
  settled,
  simOffer,
  startCluster,
  steadyLoad,
} from './cluster.ts'
import { ownerOf, servingMaster, slotOf } from './slots.ts'

const redis = await startLocalCluster(3, [], { replicas: true, nodeTimeoutMs: 1_000 })
const sim = startSim({ port: 0, tokensPerSecond: 100, outputTokens: 30 })
let gateways: Cluster | undefined
afterAll(async () => {
  await gateways?.stop()
  await sim.stop()
  redis.stop()
})

/** What a failover may answer: 200, or 503 `store_unavailable` in the contract's shape. */
const clean = (o: Outcome) =>
  o.transport === null && (o.status === 200 || (o.status === 503 && o.error === 'store_unavailable'))

test('the master holding the market is killed -9 under load: its replica takes over, money exact', async () => {
  const started = Date.now()
  gateways = await startCluster({ redisUrl: redis.url, sim, replicas: 2 })
  await simOffer(gateways, sim, 40)
  await simOffer(gateways, sim, 45)
  const buyers = await Promise.all([1, 2, 3, 4].map(() => fundedBuyer(gateways!)))
  const slot = await slotOf(redis, `${gateways.prefix}:`)
  const master = await ownerOf(redis, slot, redis.nodes)
  const replica = redis.replicas[redis.nodes.indexOf(master)]!
  const load = steadyLoad({ replicas: () => gateways!.replicas, buyers, workers: 8, streamShare: 0.5 })

  await until(() => load.outcomes.filter((o) => o.ackedCost !== null).length >= 30, 20)
  const killedAt = Date.now()
  const openAtKill = load.openNow()
  master.stop()
  await until(() => servingMaster(replica).catch(() => false), 50)
  const failoverMs = Date.now() - killedAt
  expect(await ownerOf(redis, slot, [replica])).toBe(replica)
  // Load goes on after the failover: paid requests cleared on the new master.
  const paidAfter = () =>
    load.outcomes.filter((o) => o.startedAt > killedAt + failoverMs && o.ackedCost !== null)
  await until(() => paidAfter().length >= 30, 20)
  const outcomes = await load.stop()

  // The market's slot, all of it on the new master: read there directly.
  const store = createStore(`redis://127.0.0.1:${replica.port}`, { name: 'chaos-failover' })
  try {
    const settleMs = await settled(store, gateways.prefix, 20_000)
    const atKill = (o: Outcome) => o.startedAt <= killedAt && o.endedAt >= killedAt
    const result = await reconcile(store, gateways.prefix, outcomes, atKill)
    const codes: Record<string, number> = {}
    for (const o of outcomes) {
      const code = `${o.status} ${o.error ?? o.transport ?? ''}`.trim()
      codes[code] = (codes[code] ?? 0) + 1
    }
    console.log(
      `(g) ${outcomes.length} requests (${outcomes.filter((o) => o.ackedCost !== null).length} told a cost), ` +
        `${openAtKill} open at the kill, failover ${failoverMs} ms, settled ${settleMs} ms after load, ` +
        `answers ${JSON.stringify(codes)}, attempts ${JSON.stringify(result.states)}, ` +
        `told a cost Redis lost ${result.mismatches.length} ${JSON.stringify(result.mismatches)}, ` +
        `cleared unheard ${result.unheard.length}, ${Math.round((Date.now() - started) / 1000)} s`,
    )
    expect(outcomes.filter((o) => !clean(o))).toEqual([])
    expect(paidAfter().length).toBeGreaterThanOrEqual(30)
    expect(result.states.admitted ?? 0).toBe(0)
    // What accounts spent is what their cleared attempts charged: nothing charged without a clear.
    expect(result.accountsSpent).toBe(result.totalCharged)
    expect(result.mismatches).toEqual([])
    const audit = await runAudit(redis.url, gateways.prefix)
    expect(audit.output).toContain('every invariant holds')
    expect(audit.code).toBe(0)
  } finally {
    store.close()
  }
}, 120_000)
