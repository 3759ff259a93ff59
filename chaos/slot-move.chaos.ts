// A Redis Cluster slot moved under load: the slot holding the market (layout one-slot) moved
// from its master to another as `redis-cli --cluster reshard` moves it (SETSLOT IMPORTING and
// MIGRATING, MIGRATE of its keys a few at a time, SETSLOT NODE), with paid requests running while
// the slot is split between the two. No script runs on a split slot (lua/lib/slot-guard.lua): a
// request then ends 503 `store_unavailable` or waits for the move to end; none writes half (a key
// written on the target would fail the MIGRATE with BUSYKEY), none is a 500, the audit is clean and
// every cost told is what Redis charged. Then held apart (an in-process gateway, layout apart): a
// buyer's account shard's slot moved, then the cheapest offer's, under the same load.
import { afterAll, expect, test } from 'bun:test'
import { auditApart } from '../src/market/audit-apart.ts'
import { type Owners, ownerKeyspaces } from '../src/market/two-phase.ts'
import { keyspace } from '../src/redis/keys.ts'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { until } from '../test/helpers/wait.ts'
import {
  apartGateway,
  type Cluster,
  chat,
  fundedBuyer,
  type Outcome,
  reconcile,
  runAudit,
  settled,
  simOffer,
  startCluster,
  steadyLoad,
} from './cluster.ts'
import { moveSlot, ownerOf, slotOf } from './slots.ts'

const redis = await startLocalCluster(3)
const sim = startSim({ port: 0, tokensPerSecond: 100, outputTokens: 30 })
let gateways: Cluster | undefined
const stops: (() => Promise<void>)[] = []
afterAll(async () => {
  await gateways?.stop()
  for (const stop of stops) await stop()
  await sim.stop()
  redis.stop()
})

const clean = (o: Outcome) =>
  o.transport === null && (o.status === 200 || (o.status === 503 && o.error === 'store_unavailable'))

test("the market's slot moved to another master under load: nothing half-written, money exact", async () => {
  const started = Date.now()
  gateways = await startCluster({ redisUrl: redis.url, sim, replicas: 2 })
  await simOffer(gateways, sim, 40)
  await simOffer(gateways, sim, 45)
  const buyers = await Promise.all([1, 2, 3, 4].map(() => fundedBuyer(gateways!)))
  const slot = await slotOf(redis, `${gateways.prefix}:`)
  const from = await ownerOf(redis, slot, redis.nodes)
  const to = redis.nodes.find((n) => n !== from)!
  const load = steadyLoad({ replicas: () => gateways!.replicas, buyers, workers: 8, streamShare: 0.5 })
  await until(() => load.outcomes.filter((o) => o.ackedCost !== null).length >= 30, 20)

  const moveStarted = Date.now()
  // After each batch, one more request sent and answered while the slot is split (the load's
  // clients may all be waiting on clears that wait for the move to end).
  const probes: Outcome[] = []
  const moved = await moveSlot(redis, slot, from, to, {
    batches: 6,
    between: async () => {
      const replica = gateways!.replicas[probes.length % 2]!
      probes.push(await chat(replica, buyers[probes.length % buyers.length]!.apiKey, probes.length % 2 === 0))
    },
  })
  const moveEnded = Date.now()
  expect(await ownerOf(redis, slot, redis.nodes)).toBe(to)
  const paidAfter = () => load.outcomes.filter((o) => o.startedAt > moveEnded && o.ackedCost !== null)
  await until(() => paidAfter().length >= 30, 20)
  const outcomes = [...(await load.stop()), ...probes]

  const store = createStore(`redis://127.0.0.1:${to.port}`, { name: 'chaos-slot-move' })
  try {
    const settleMs = await settled(store, gateways.prefix, 20_000)
    const result = await reconcile(store, gateways.prefix, outcomes, () => false)
    const during = outcomes.filter((o) => o.endedAt >= moveStarted && o.startedAt <= moveEnded)
    const codes: Record<string, number> = {}
    for (const o of during) {
      const code = `${o.status} ${o.error ?? o.transport ?? ''}`.trim()
      codes[code] = (codes[code] ?? 0) + 1
    }
    console.log(
      `(slot move) ${outcomes.length} requests (${outcomes.filter((o) => o.ackedCost !== null).length} told a cost), ` +
        `slot moved in ${moveEnded - moveStarted} ms (${moved.keys} keys, ${moved.batches} MIGRATEs), ` +
        `answers during it ${JSON.stringify(codes)} (probes ${probes.map((o) => o.status).join(' ')}), settled ${settleMs} ms after load, ` +
        `attempts ${JSON.stringify(result.states)}, ${Math.round((Date.now() - started) / 1000)} s`,
    )
    expect(moved.batches).toBeGreaterThan(1)
    expect(probes.length).toBe(moved.batches)
    expect(outcomes.filter((o) => !clean(o))).toEqual([])
    expect(result.states.admitted ?? 0).toBe(0)
    expect(result.mismatches).toEqual([])
    expect(result.accountsSpent).toBe(result.totalCharged)
    const audit = await runAudit(redis.url, gateways.prefix)
    expect(audit.output).toContain('every invariant holds')
    expect(audit.code).toBe(0)
  } finally {
    store.close()
  }
}, 120_000)

test("held apart: a buyer's account shard and the cheapest offer moved under load; pairs and sums exact", async () => {
  const started = Date.now()
  const { stack, gateways: apart } = await apartGateway(redis.url)
  stops.push(() => stack.stop())
  const prefix = stack.config.redisPrefix
  const keys = keyspace(prefix, 'apart')
  const owners: Owners = ownerKeyspaces(prefix)
  await simOffer(apart, stack.sim, 40)
  await simOffer(apart, stack.sim, 45)
  const buyers = await Promise.all([1, 2, 3, 4].map(() => fundedBuyer(apart)))
  const store = createStore(redis.url, { name: 'chaos-slot-move-apart' })
  stops.push(async () => store.close())
  await store.whenReady(15_000)
  const offerIds = await store.smembers(keys.offers)
  const cheapest = (
    await Promise.all(
      offerIds.map(async (id) => ({ id, ask: Number(await store.hget(keys.offer(id), 'askCents')) })),
    )
  ).sort((a, b) => a.ask - b.ask)[0]!.id
  const load = steadyLoad({ replicas: () => apart.replicas, buyers, workers: 8, streamShare: 0.5 })
  await until(() => load.outcomes.filter((o) => o.ackedCost !== null).length >= 30, 20)

  const probes: Outcome[] = []
  const moves: string[] = []
  // The first buyer's shard, then the offer every request reserves on first.
  for (const [what, key, prober] of [
    ['account shard', keys.account(buyers[0]!.accountId), buyers[0]!],
    ['offer', owners.offer(cheapest).offer(cheapest), buyers[1]!],
  ] as const) {
    const slot = await slotOf(redis, key)
    const from = await ownerOf(redis, slot, redis.nodes)
    const to = redis.nodes.find((n) => n !== from)!
    const moveStarted = Date.now()
    const moved = await moveSlot(redis, slot, from, to, {
      batches: 5,
      between: async () => {
        probes.push(await chat(apart.replicas[0]!, prober.apiKey, probes.length % 2 === 0))
      },
    })
    expect(await ownerOf(redis, slot, redis.nodes)).toBe(to)
    expect(moved.batches).toBeGreaterThan(1)
    moves.push(
      `${what} slot ${slot}: ${moved.keys} keys in ${moved.batches} MIGRATEs, ${Date.now() - moveStarted} ms`,
    )
  }
  const movesEnded = Date.now()
  const paidAfter = () => load.outcomes.filter((o) => o.startedAt > movesEnded && o.ackedCost !== null)
  await until(() => paidAfter().length >= 30, 20)
  const outcomes = [...(await load.stop()), ...probes]

  const deadline = Date.now() + 30_000
  let findings = await auditApart(store, prefix)
  while (findings.length > 0 && Date.now() < deadline) {
    await Bun.sleep(100)
    findings = await auditApart(store, prefix)
  }
  const result = await reconcile(store, prefix, outcomes, () => false, 'apart')
  console.log(
    `(slot move apart) ${outcomes.length} requests (${outcomes.filter((o) => o.ackedCost !== null).length} told a cost), ` +
      `${moves.join('; ')}, probes ${probes.map((o) => `${o.status} ${o.error ?? ''}`.trim()).join(', ')}, ` +
      `attempts ${JSON.stringify(result.states)}, ${Math.round((Date.now() - started) / 1000)} s`,
  )
  expect(outcomes.filter((o) => !clean(o))).toEqual([])
  expect(findings).toEqual([])
  expect(result.states.admitted ?? 0).toBe(0)
  expect(result.mismatches).toEqual([])
  expect(result.accountsSpent).toBe(result.totalCharged)
}, 120_000)
