// A Redis Cluster slot moved under load: the slot holding the market (layout one-slot) moved
// from its master to another as `redis-cli --cluster reshard` moves it (SETSLOT IMPORTING and
// MIGRATING, MIGRATE of its keys a few at a time, SETSLOT NODE), with paid requests running while
// the slot is split between the two. No script runs on a split slot (lua/lib/slot-guard.lua): a
// request then ends 503 `store_unavailable` or waits for the move to end; none writes half (a key
// written on the target would fail the MIGRATE with BUSYKEY), none is a 500, the audit is clean and
// every cost told is what Redis charged. Then held apart (a gateway in process, layout apart): a
// buyer's account shard's slot moved, then the cheapest offer's, under the same load.
import { afterAll, expect, test } from 'bun:test'
import { ownerKeyspaces } from '../src/market/two-phase.ts'
import { keyspace } from '../src/redis/keys.ts'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { until } from '../test/helpers/wait.ts'
import {
  type Buyer,
  type Cluster,
  chat,
  type Endpoint,
  type Outcome,
  reconcile,
  settled,
  steadyLoad,
} from './cluster.ts'
import {
  answerCounts,
  apartMarket,
  auditApartSettled,
  expectAuditClean,
  expectCleanAndExact,
  oneSlotMarket,
} from './cluster-checks.ts'
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

/**
 * Moves the slot of each key to another master, in `batches` MIGRATEs each, once `load` has 30
 * paid requests; after each batch one more request is sent (by `prober`, through `endpoint`) and
 * answered while the slot is split (the load's own clients may all be waiting on clears that wait
 * for the move's end). Then 30 more paid requests begun after the moves; returns every outcome.
 */
async function movesUnderLoad(
  load: ReturnType<typeof steadyLoad>,
  moves: { key: string; prober: Buyer }[],
  endpoints: Endpoint[],
  batches: number,
) {
  await until(() => load.outcomes.filter((o) => o.ackedCost !== null).length >= 30, 20)
  const probes: Outcome[] = []
  // Each move's own probes, sent while its slot was split.
  const probesOf: Outcome[][] = []
  const done: string[] = []
  const movesStarted = Date.now()
  for (const { key, prober } of moves) {
    const own: Outcome[] = []
    probesOf.push(own)
    const slot = await slotOf(redis, key)
    const from = await ownerOf(redis, slot, redis.nodes)
    const to = redis.nodes.find((n) => n !== from)!
    const started = Date.now()
    const moved = await moveSlot(redis, slot, from, to, {
      batches,
      between: async () => {
        const endpoint = endpoints[probes.length % endpoints.length]!
        const probe = await chat(endpoint, prober.apiKey, probes.length % 2 === 0)
        probes.push(probe)
        own.push(probe)
      },
    })
    expect(await ownerOf(redis, slot, redis.nodes)).toBe(to)
    expect(moved.batches).toBeGreaterThan(1)
    done.push(`slot ${slot}: ${moved.keys} keys in ${moved.batches} MIGRATEs, ${Date.now() - started} ms`)
  }
  const movesEnded = Date.now()
  await until(
    () => load.outcomes.filter((o) => o.startedAt > movesEnded && o.ackedCost !== null).length >= 30,
    20,
  )
  const outcomes = [...(await load.stop()), ...probes]
  const during = outcomes.filter((o) => o.endedAt >= movesStarted && o.startedAt <= movesEnded)
  return { outcomes, probes, probesOf, during, done }
}

test("the market's slot moved to another master under load: nothing half-written, money exact", async () => {
  const started = Date.now()
  const { gateways: g, buyers } = await oneSlotMarket(redis.url, sim)
  gateways = g
  const market = `${g.prefix}:`
  const load = steadyLoad({ replicas: () => g.replicas, buyers, workers: 8, streamShare: 0.5 })
  const { outcomes, probes, during, done } = await movesUnderLoad(
    load,
    [{ key: market, prober: buyers[0]! }],
    g.replicas,
    6,
  )

  const owner = await ownerOf(redis, await slotOf(redis, market), redis.nodes)
  const store = createStore(`redis://127.0.0.1:${owner.port}`, { name: 'chaos-slot-move' })
  try {
    const settleMs = await settled(store, g.prefix, 20_000)
    const result = await reconcile(store, g.prefix, outcomes, () => false)
    console.log(
      `(slot move) ${outcomes.length} requests (${outcomes.filter((o) => o.ackedCost !== null).length} told a cost), ` +
        `${done.join('; ')}, answers during it ${JSON.stringify(answerCounts(during))} ` +
        `(probes ${probes.map((o) => o.status).join(' ')}), settled ${settleMs} ms after load, ` +
        `attempts ${JSON.stringify(result.states)}, ${Math.round((Date.now() - started) / 1000)} s`,
    )
    expectCleanAndExact(outcomes, result)
    await expectAuditClean(redis.url, g.prefix)
  } finally {
    store.close()
  }
}, 120_000)

test("held apart: a buyer's account shard and the cheapest offer moved under load; pairs and sums exact", async () => {
  const started = Date.now()
  const { stack, gateways: apart, buyers, prefix } = await apartMarket(redis.url, 4)
  stops.push(() => stack.stop())
  const keys = keyspace(prefix, 'apart')
  const store = createStore(redis.url, { name: 'chaos-slot-move-apart' })
  stops.push(async () => store.close())
  await store.whenReady(15_000)
  const asks = await Promise.all(
    (await store.smembers(keys.offers)).map(async (id) => ({
      id,
      ask: Number(await store.hget(keys.offer(id), 'askCents')),
    })),
  )
  const cheapest = asks.sort((a, b) => a.ask - b.ask)[0]!.id
  const load = steadyLoad({ replicas: () => apart.replicas, buyers, workers: 8, streamShare: 0.5 })
  // The first buyer's shard, then the offer every request reserves on first.
  const { outcomes, probes, probesOf, done } = await movesUnderLoad(
    load,
    [
      { key: keys.account(buyers[0]!.accountId), prober: buyers[0]! },
      { key: ownerKeyspaces(prefix).offer(cheapest).offer(cheapest), prober: buyers[1]! },
    ],
    apart.replicas,
    5,
  )

  const findings = await auditApartSettled(store, prefix, 30_000)
  const result = await reconcile(store, prefix, outcomes, () => false, 'apart')
  console.log(
    `(slot move apart) ${outcomes.length} requests (${outcomes.filter((o) => o.ackedCost !== null).length} told a cost), ` +
      `account shard ${done[0]}, offer ${done[1]}, probes ${JSON.stringify(answerCounts(probes))}, ` +
      `attempts ${JSON.stringify(result.states)}, ${Math.round((Date.now() - started) / 1000)} s`,
  )
  expect(findings).toEqual([])
  expectCleanAndExact(outcomes, result)
  // While the cheapest offer's slot was split, its reservations were refused and the next offer
  // served: every probe then was paid.
  expect(answerCounts(probesOf[1]!)).toEqual({ '200': probesOf[1]!.length })
}, 120_000)
