// A Redis Cluster master killed -9 under load: three masters, each with a replica, and the
// market on one slot (layout one-slot) served by two gateway replicas as `serve` processes given
// the Cluster's URL. The master holding the market's slot is killed mid-load; its replica takes
// over. Requests during the failover end 200 or 503 `store_unavailable` (never a 500, never a
// connection dropped), load goes on after it, the real `svc-gateway audit` finds nothing, and every
// cost a client was told is what Redis charged, apart from clears the kill took before they
// reached the replica (asynchronous replication: counted and reported, see RELIABILITY.md). Then
// the same with the market held apart (an in-process gateway, layout apart): a master holding
// buyers' account shards killed, auditApart clean, buyers' spend what suppliers earned plus fees.
import { afterAll, expect, test } from 'bun:test'
import { auditApart } from '../src/market/audit-apart.ts'
import { keyspace } from '../src/redis/keys.ts'
import { type ClusterNode, startLocalCluster } from '../src/redis/local-cluster.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { until } from '../test/helpers/wait.ts'
import {
  apartGateway,
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
const stops: (() => Promise<void>)[] = []
afterAll(async () => {
  await gateways?.stop()
  for (const stop of stops) await stop()
  await sim.stop()
  redis.stop()
})

/** The masters killed so far (each test kills one that still has its replica). */
const killed = new Set<ClusterNode>()

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
  killed.add(master)
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
      `(failover) ${outcomes.length} requests (${outcomes.filter((o) => o.ackedCost !== null).length} told a cost), ` +
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

test("held apart: a master holding buyers' account shards is killed -9 under load; pairs and sums exact", async () => {
  const started = Date.now()
  const { stack, gateways: apart } = await apartGateway(redis.url)
  stops.push(() => stack.stop())
  const prefix = stack.config.redisPrefix
  const keys = keyspace(prefix, 'apart')
  await simOffer(apart, stack.sim, 40)
  await simOffer(apart, stack.sim, 45)
  const buyers = await Promise.all([1, 2, 3, 4, 5, 6].map(() => fundedBuyer(apart)))
  // The masters that still have a replica (the first test killed one); of them, the one holding
  // the most buyers' accounts.
  const withReplica = redis.nodes.filter((n) => !killed.has(n))
  const owners = await Promise.all(
    buyers.map(async (b) =>
      ownerOf(redis, await slotOf(redis, keys.account(b.accountId)), [redis.replicas[0]!]),
    ),
  )
  const master = withReplica
    .map((n) => ({ n, count: owners.filter((o) => o === n).length }))
    .sort((a, b) => b.count - a.count)[0]!
  expect(master.count).toBeGreaterThan(0)
  const replica = redis.replicas[redis.nodes.indexOf(master.n)]!
  const load = steadyLoad({ replicas: () => apart.replicas, buyers, workers: 8, streamShare: 0.5 })

  await until(() => load.outcomes.filter((o) => o.ackedCost !== null).length >= 30, 20)
  const killedAt = Date.now()
  killed.add(master.n)
  master.n.stop()
  await until(() => servingMaster(replica).catch(() => false), 50)
  const failoverMs = Date.now() - killedAt
  const onKilled = new Set(buyers.filter((_, i) => owners[i] === master.n).map((b) => b.apiKey))
  const paidAfter = () =>
    load.outcomes.filter((o) => o.startedAt > killedAt + failoverMs && o.ackedCost !== null)
  await until(() => paidAfter().length >= 30, 20)
  const outcomes = await load.stop()

  const store = createStore(redis.url, { name: 'chaos-failover-apart' })
  try {
    await store.whenReady(15_000)
    // Every pair finished (cleared and posted, or released and voided, or reaped) once quiet.
    const deadline = Date.now() + 30_000
    let findings = await auditApart(store, prefix)
    while (findings.length > 0 && Date.now() < deadline) {
      await Bun.sleep(100)
      findings = await auditApart(store, prefix)
    }
    const atKill = (o: Outcome) => o.startedAt <= killedAt && o.endedAt >= killedAt
    const result = await reconcile(store, prefix, outcomes, atKill, 'apart')
    const codes: Record<string, number> = {}
    for (const o of outcomes) {
      const code = `${o.status} ${o.error ?? o.transport ?? ''}`.trim()
      codes[code] = (codes[code] ?? 0) + 1
    }
    console.log(
      `(failover apart) ${outcomes.length} requests (${outcomes.filter((o) => o.ackedCost !== null).length} told a cost), ` +
        `${master.count} of ${buyers.length} buyers' accounts on the killed master, failover ${failoverMs} ms, ` +
        `answers ${JSON.stringify(codes)}, attempts ${JSON.stringify(result.states)}, ` +
        `told a cost Redis lost ${result.mismatches.length} ${JSON.stringify(result.mismatches)}, ` +
        `cleared unheard ${result.unheard.length}, ${Math.round((Date.now() - started) / 1000)} s`,
    )
    expect(onKilled.size).toBe(master.count)
    expect(outcomes.filter((o) => !clean(o))).toEqual([])
    expect(findings).toEqual([])
    expect(result.states.admitted ?? 0).toBe(0)
    expect(result.accountsSpent).toBe(result.totalCharged)
    expect(result.mismatches).toEqual([])
  } finally {
    store.close()
  }
}, 120_000)
