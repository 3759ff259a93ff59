// A Redis Cluster master killed -9 under load: three masters, each with a replica, and the
// market on one slot (layout one-slot) served by two gateway replicas as `serve` processes given
// the Cluster's URL. The master holding the market's slot is killed mid-load; its replica takes
// over. Requests during the failover end 200 or 503 `store_unavailable` (never a 500, never a
// connection dropped), load goes on after it, the real `svc-gateway audit` finds nothing, and every
// cost a client was told is what Redis charged (a clear the kill took before it reached the
// replica would show here: asynchronous replication, see RELIABILITY.md). Then the same with the
// market held apart (a gateway in process, layout apart): a master holding buyers' account shards
// killed, auditApart clean, buyers' spend what suppliers earned plus fees.
import { afterAll, expect, test } from 'bun:test'
import { keyspace } from '../src/redis/keys.ts'
import { type ClusterNode, startLocalCluster } from '../src/redis/local-cluster.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { until } from '../test/helpers/wait.ts'
import { type Cluster, type Outcome, reconcile, settled, steadyLoad } from './cluster.ts'
import {
  answerCounts,
  apartMarket,
  auditApartSettled,
  expectAuditClean,
  expectCleanAndExact,
  oneSlotMarket,
} from './cluster-checks.ts'
import { ownerOf, servingMaster, slotOf } from './slots.ts'

const redis = await startLocalCluster(3, [], { replicas: true, nodeTimeoutMs: 1_000 })
const sim = startSim({ port: 0, tokensPerSecond: 100, outputTokens: 30 })
let gateways: Cluster | undefined
const stops: (() => Promise<void>)[] = []
afterAll(async () => {
  await gateways?.stop()
  for (const stop of stops) await stop()
  await sim.stop()
  redis.stop()
})

/** The masters killed so far (each test kills one that still has its replica). */
const killed = new Set<ClusterNode>()

/**
 * Kills `master` once `load` has 30 paid requests, waits for its replica to serve, then for 30
 * more paid requests begun after; returns the load's outcomes, when it killed and how long the
 * failover took.
 */
async function killUnderLoad(master: ClusterNode, load: ReturnType<typeof steadyLoad>) {
  const replica = redis.replicas[redis.nodes.indexOf(master)]!
  await until(() => load.outcomes.filter((o) => o.ackedCost !== null).length >= 30, 20)
  const killedAt = Date.now()
  const openAtKill = load.openNow()
  killed.add(master)
  master.stop()
  await until(() => servingMaster(replica).catch(() => false), 50)
  const failoverMs = Date.now() - killedAt
  const paidAfter = () =>
    load.outcomes.filter((o) => o.startedAt > killedAt + failoverMs && o.ackedCost !== null)
  await until(() => paidAfter().length >= 30, 20)
  const outcomes = await load.stop()
  const atKill = (o: Outcome) => o.startedAt <= killedAt && o.endedAt >= killedAt
  return { replica, outcomes, openAtKill, failoverMs, atKill }
}

test('the master holding the market is killed -9 under load: its replica takes over, money exact', async () => {
  const started = Date.now()
  const { gateways: g, buyers } = await oneSlotMarket(redis.url, sim)
  gateways = g
  const slot = await slotOf(redis, `${g.prefix}:`)
  const master = await ownerOf(redis, slot, redis.nodes)
  const load = steadyLoad({ replicas: () => g.replicas, buyers, workers: 8, streamShare: 0.5 })
  const { replica, outcomes, openAtKill, failoverMs, atKill } = await killUnderLoad(master, load)
  expect(await ownerOf(redis, slot, [replica])).toBe(replica)

  // The market's slot, all of it on the new master: read there directly.
  const store = createStore(`redis://127.0.0.1:${replica.port}`, { name: 'chaos-failover' })
  try {
    const settleMs = await settled(store, g.prefix, 20_000)
    const result = await reconcile(store, g.prefix, outcomes, atKill)
    console.log(
      `(failover) ${outcomes.length} requests (${outcomes.filter((o) => o.ackedCost !== null).length} told a cost), ` +
        `${openAtKill} open at the kill, failover ${failoverMs} ms, settled ${settleMs} ms after load, ` +
        `answers ${JSON.stringify(answerCounts(outcomes))}, attempts ${JSON.stringify(result.states)}, ` +
        `told a cost Redis lost ${result.mismatches.length} ${JSON.stringify(result.mismatches)}, ` +
        `cleared unheard ${result.unheard.length}, ${Math.round((Date.now() - started) / 1000)} s`,
    )
    expectCleanAndExact(outcomes, result)
    await expectAuditClean(redis.url, g.prefix)
  } finally {
    store.close()
  }
}, 120_000)

test("held apart: a master holding buyers' account shards is killed -9 under load; pairs and sums exact", async () => {
  const started = Date.now()
  const { stack, gateways: apart, buyers, prefix } = await apartMarket(redis.url, 6)
  stops.push(() => stack.stop())
  const keys = keyspace(prefix, 'apart')
  // Of the masters that still have a replica (the first test killed one), the one holding the
  // most buyers' accounts.
  const owners = await Promise.all(
    buyers.map(async (b) =>
      ownerOf(redis, await slotOf(redis, keys.account(b.accountId)), [redis.replicas[0]!]),
    ),
  )
  const [master] = redis.nodes
    .filter((n) => !killed.has(n))
    .map((n) => ({ n, count: owners.filter((o) => o === n).length }))
    .sort((a, b) => b.count - a.count)
  expect(master!.count).toBeGreaterThan(0)
  const load = steadyLoad({ replicas: () => apart.replicas, buyers, workers: 8, streamShare: 0.5 })
  const { outcomes, failoverMs, atKill } = await killUnderLoad(master!.n, load)

  const store = createStore(redis.url, { name: 'chaos-failover-apart' })
  try {
    await store.whenReady(15_000)
    // Every pair finished (cleared and posted, released and voided, or reaped) once quiet.
    const findings = await auditApartSettled(store, prefix, 30_000)
    const result = await reconcile(store, prefix, outcomes, atKill, 'apart')
    console.log(
      `(failover apart) ${outcomes.length} requests (${outcomes.filter((o) => o.ackedCost !== null).length} told a cost), ` +
        `${master!.count} of ${buyers.length} buyers' accounts on the killed master, failover ${failoverMs} ms, ` +
        `answers ${JSON.stringify(answerCounts(outcomes))}, attempts ${JSON.stringify(result.states)}, ` +
        `told a cost Redis lost ${result.mismatches.length} ${JSON.stringify(result.mismatches)}, ` +
        `cleared unheard ${result.unheard.length}, ${Math.round((Date.now() - started) / 1000)} s`,
    )
    expect(findings).toEqual([])
    expectCleanAndExact(outcomes, result)
  } finally {
    store.close()
  }
}, 120_000)
