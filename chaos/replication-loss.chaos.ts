// What asynchronous replication loses on a Redis Cluster, and how the gateway gets it back: the
// replication link of the master holding the market's slot is cut (CLIENT KILL TYPE replica, the
// replica held by DEBUG SLEEP so it cannot reconnect), two paid requests are served and told their
// cost, the first longer before the kill than the clear journal's window, and the master is killed
// -9: its replica takes over with neither request's admission nor its clear. The gateway's
// connection to the dead master closes, and its clear journal (src/market/clear-journal.ts), which
// keeps a clear until its master's replicas have it, sends them again once the new master serves:
// each, found with no attempt, is cleared from the admission it carries. Every cost a
// client was told is what the new master charged, and `svc-gateway audit` finds nothing off
// (RELIABILITY.md, "What replication can lose").
import { afterAll, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { JOURNAL_MS } from '../src/market/clear-journal.ts'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { createStore, type Store } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { putToSleep } from '../test/helpers/replicated-redis.ts'
import { until } from '../test/helpers/wait.ts'
import { chat, fundedBuyer, reconcile, runAudit, settled, simOffer, startCluster } from './cluster.ts'
import { ownerOf, servingMaster, slotOf } from './slots.ts'

const redis = await startLocalCluster(3, ['--enable-debug-command', 'yes'], {
  replicas: true,
  nodeTimeoutMs: 1_000,
})
const sim = startSim({ port: 0, tokensPerSecond: 200, outputTokens: 20 })
const gateways = await startCluster({ redisUrl: redis.url, sim, replicas: 1 })
let onNew: Store | undefined
afterAll(async () => {
  onNew?.close()
  await gateways.stop()
  await sim.stop()
  redis.stop()
})

test('requests whose admission and clear only the killed master had are charged on the new master what they were told', async () => {
  await simOffer(gateways, sim, 40)
  const buyer = await fundedBuyer(gateways)
  const gateway = gateways.replicas[0]!
  const before = await chat(gateway, buyer.apiKey, false)
  const slot = await slotOf(redis, `${gateways.prefix}:`)
  const master = await ownerOf(redis, slot, redis.nodes)
  const replica = redis.replicas[redis.nodes.indexOf(master)]!

  // Asleep past the two requests and the journal's window between them.
  await putToSleep(`redis://127.0.0.1:${replica.port}`, 6)
  const onMaster = new Redis(master.port, '127.0.0.1')
  await onMaster.call('CLIENT', 'KILL', 'TYPE', 'replica')
  onMaster.disconnect()
  const during = await chat(gateway, buyer.apiKey, false)
  expect(during.ackedCost).toBeGreaterThan(0)
  // Past the window: only its replicas' silence keeps this clear in the journal now.
  const answeredAt = Date.now()
  await until(() => Date.now() > answeredAt + JOURNAL_MS + 200, 50)
  // The journal still keeps that clear, past its window: the replica never acknowledged it (nor,
  // when it fell asleep before its once-a-second acknowledgement, the one before the cut).
  const scraped = await scrape(gateway, gateways.adminToken)
  const kept = Number(scraped.match(/^svc_journal_clears (\d+)$/m)?.[1])
  expect(kept).toBeGreaterThanOrEqual(1)
  expect(kept).toBeLessThanOrEqual(2)
  // Named by its master: the one whose replica sleeps, its oldest unacknowledged clear past the window.
  const ages = [...scraped.matchAll(/^svc_journal_unreplicated_seconds\{master="([^"]*)"\} (\S+)$/gm)]
  expect(ages.map((m) => m[1])).toEqual([`127.0.0.1:${master.port}`])
  expect(Number(ages[0]![2])).toBeGreaterThan(JOURNAL_MS / 1000)
  const late = await chat(gateway, buyer.apiKey, false)
  expect(late.ackedCost).toBeGreaterThan(0)
  master.stop()
  const killedAt = Date.now()
  await until(() => servingMaster(replica).catch(() => false), 50)
  const failoverMs = Date.now() - killedAt
  const after = await chat(gateway, buyer.apiKey, false)

  onNew = createStore(`redis://127.0.0.1:${replica.port}`, { name: 'replication-loss' })
  await settled(onNew, gateways.prefix, 20_000)
  const told = [before, during, late, after]
  // The journal's replay lands once the new master serves: wait for it, not for a time.
  await until(
    async () => (await reconcile(onNew!, gateways.prefix, told, () => false)).mismatches.length === 0,
    100,
  )
  const result = await reconcile(onNew, gateways.prefix, told, () => false)
  console.log(
    `(replication loss) told ${told.map((o) => o.ackedCost).join(', ')}, failover ${failoverMs} ms, attempts ${JSON.stringify(result.states)}`,
  )
  expect(result.states).toEqual({ cleared: 4 })
  expect(result.accountsSpent).toBe(told.reduce((sum, o) => sum + o.ackedCost!, 0))
  const metrics = await scrape(gateway, gateways.adminToken)
  expect(metrics).toMatch(/^svc_replayed_clears_total\{found="restored"\} 2$/m)
  expect(metrics).toMatch(/^svc_lost_admissions_total 2$/m)
  expect(metrics).not.toMatch(/^svc_unreplicated_clears_total [1-9]/m)
  const audit = await runAudit(redis.url, gateways.prefix)
  expect(audit.code).toBe(0)
}, 120_000)

async function scrape(gateway: { url: string }, adminToken: string): Promise<string> {
  const response = await fetch(`${gateway.url}/metrics`, {
    headers: { authorization: `Bearer ${adminToken}` },
  })
  return response.text()
}
