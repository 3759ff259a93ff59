// What asynchronous replication can lose on a Redis Cluster, shown rather than argued: the
// replication link of the master holding the market's slot is cut (CLIENT KILL TYPE replica, the
// replica held by DEBUG SLEEP so it cannot reconnect), one paid request is served and told its
// cost, the master is killed -9 and its replica takes over. The request's admission and clear were
// on the old master alone: the new master has no trace of them, the buyer is not charged what it
// was told, and `svc-gateway audit` finds nothing wrong (RELIABILITY.md, "What replication can
// lose"). A demonstration, not a test (it shows a limit, not a rule that holds):
//   bun chaos/replication-loss.ts
import Redis from 'ioredis'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { createStore, type Store } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { chat, fundedBuyer, reconcile, runAudit, settled, simOffer, startCluster } from './cluster.ts'
import { ownerOf, servingMaster, slotOf } from './slots.ts'

const redis = await startLocalCluster(3, ['--enable-debug-command', 'yes'], {
  replicas: true,
  nodeTimeoutMs: 1_000,
})
const sim = startSim({ port: 0, tokensPerSecond: 200, outputTokens: 20 })
const gateways = await startCluster({ redisUrl: redis.url, sim, replicas: 1 })
let onNew: Store | undefined
try {
  await simOffer(gateways, sim, 40)
  const buyer = await fundedBuyer(gateways)
  const gateway = gateways.replicas[0]!
  const before = await chat(gateway, buyer.apiKey, false)
  const slot = await slotOf(redis, `${gateways.prefix}:`)
  const master = await ownerOf(redis, slot, redis.nodes)
  const replica = redis.replicas[redis.nodes.indexOf(master)]!

  const sleeper = new Redis(replica.port, '127.0.0.1')
  void sleeper.call('DEBUG', 'SLEEP', '3').catch(() => {})
  const onMaster = new Redis(master.port, '127.0.0.1')
  // The sleep has begun once the replica stops answering.
  const probe = new Redis(replica.port, '127.0.0.1', { commandTimeout: 200, maxRetriesPerRequest: 0 })
  while (
    await probe.ping().then(
      () => true,
      () => false,
    )
  );
  probe.disconnect()
  await onMaster.call('CLIENT', 'KILL', 'TYPE', 'replica')
  onMaster.disconnect()
  const during = await chat(gateway, buyer.apiKey, false)
  master.stop()
  const killedAt = Date.now()
  while (!(await servingMaster(replica).catch(() => false))) await Bun.sleep(50)
  const failoverMs = Date.now() - killedAt
  const after = await chat(gateway, buyer.apiKey, false)
  sleeper.disconnect()

  onNew = createStore(`redis://127.0.0.1:${replica.port}`, { name: 'replication-loss' })
  await settled(onNew, gateways.prefix, 20_000)
  const result = await reconcile(onNew, gateways.prefix, [before, during, after], () => false)
  const audit = await runAudit(redis.url, gateways.prefix)
  console.log(
    JSON.stringify(
      {
        told: { before: before.ackedCost, during: during.ackedCost, after: after.ackedCost },
        failoverMs,
        attempts: result.states,
        lost: result.mismatches,
        accountSpent: result.accountsSpent,
        audit: audit.output.trim(),
      },
      null,
      1,
    ),
  )
} finally {
  onNew?.close()
  await gateways.stop()
  await sim.stop()
  redis.stop()
}
