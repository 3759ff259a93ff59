// Costs told once replicated, on a Cluster: three masters with a replica each, the market held
// apart, two compiled gateways on it (one telling costs at once, one with SVC_CLEAR_REPLICAS=1),
// buffered chat through each at 1 and 32 clients in rotated order. Then, with the replica of one
// master asleep, the second gateway's buyer whose account lies on that master, against one whose
// account and offer lie elsewhere: a clear waits only on the replicas of the masters it wrote on.
//   bun bench/clear-replicas-cluster.ts [seconds=4] [rounds=3]
import { ownerKeyspaces } from '../src/market/two-phase.ts'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { createStore } from '../src/redis/store.ts'
import { putToSleep } from '../test/helpers/replicated-redis.ts'
import { type BenchGateway, BenchStack, type Buyer, fundedBuyer, postOffer, type Target } from './stack.ts'
import { inRoundOrder, median } from './stats.ts'
import { runWrk } from './wrk.ts'

const [seconds = '4', rounds = '3'] = process.argv.slice(2)
const WAIT_MS = 100
const body = JSON.stringify({
  model: 'llama-3.3-70b',
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 64,
})

const target = (gateway: BenchGateway, buyer: Buyer): Target => ({
  name: 'gateway',
  url: `${gateway.url}/v1/chat/completions`,
  headers: { 'content-type': 'application/json', authorization: `Bearer ${buyer.apiKey}` },
  pid: gateway.service.pid,
})

const cluster = await startLocalCluster(3, ['--enable-debug-command', 'yes'], { replicas: true })
const store = createStore(cluster.url, { name: 'svc-bench-clear-replicas-cluster' })
const stack = new BenchStack()
try {
  await stack.startRedis() // the stack's own; the gateways are given the Cluster instead
  await store.whenReady(15_000)
  const sim = await stack.startSim('sim')
  const gateways: Record<string, BenchGateway> = {}
  const byName: Record<string, Target> = {}
  const offers: Record<string, string> = {}
  for (const [name, env] of [
    ['told-at-once', {}],
    ['told-replicated', { SVC_CLEAR_REPLICAS: '1', SVC_CLEAR_REPLICAS_WAIT_MS: String(WAIT_MS) }],
  ] as const) {
    const gateway = await stack.startGateway(name, sim.url, undefined, 'unix', {
      REDIS_URL: cluster.url,
      SVC_REDIS_LAYOUT: 'apart',
      ...env,
    })
    gateways[name] = gateway
    const offer = await postOffer(gateway, sim, `bench-supplier-${name}`, 50)
    offers[name] = String(offer.offerId ?? offer.id)
    byName[name] = target(gateway, await fundedBuyer(gateway))
  }
  console.log('| gateway | clients | p50 ms | p99 ms | requests/s |')
  console.log('|---|---|---|---|---|')
  for (const connections of [1, 32]) {
    const seen: Record<string, { p50: number[]; p99: number[]; rps: number[] }> = {}
    for (let round = 0; round < Number(rounds); round++) {
      for (const name of inRoundOrder(Object.keys(byName), round)) {
        await runWrk(byName[name]!, body, connections, 1, stack.logDir)
        const result = await runWrk(byName[name]!, body, connections, Number(seconds), stack.logDir)
        if (result.errors > 0) throw new Error(`${name}: ${result.errors} errors`)
        seen[name] ??= { p50: [], p99: [], rps: [] }
        seen[name].p50.push(result.p50Ms)
        seen[name].p99.push(result.p99Ms)
        seen[name].rps.push(result.rps)
      }
    }
    for (const [name, row] of Object.entries(seen)) {
      console.log(
        `| ${name} | ${connections} | ${median(row.p50).toFixed(3)} | ${median(row.p99).toFixed(3)} | ${median(row.rps).toFixed(0)} |`,
      )
    }
  }

  // One master's replica asleep: a buyer on that master, and one whose clears write elsewhere.
  const gateway = gateways['told-replicated']!
  const owners = ownerKeyspaces('bench:{told-replicated}')
  const offerMaster = store.masterOf(owners.offer(offers['told-replicated']!).base)
  const masterOf = (buyer: Buyer) => store.masterOf(owners.account(buyer.accountId).base)
  let onSleeper: Buyer | undefined
  let elsewhere: Buyer | undefined
  while (!onSleeper || !elsewhere) {
    const buyer = await fundedBuyer(gateway)
    const master = masterOf(buyer)
    if (!onSleeper && master !== offerMaster) onSleeper = buyer
    else if (onSleeper && master !== masterOf(onSleeper) && master !== offerMaster) elsewhere = buyer
  }
  const sleeper = cluster.nodes.findIndex((n) => `127.0.0.1:${n.port}` === masterOf(onSleeper!))
  await putToSleep(`redis://127.0.0.1:${cluster.replicas[sleeper]!.port}`, 4 * Number(seconds) + 10)
  console.log(
    `\nThe replica of the master of one buyer's account asleep (SVC_CLEAR_REPLICAS_WAIT_MS=${WAIT_MS}):\n`,
  )
  console.log('| buyer | clients | p50 ms | p99 ms | requests/s |')
  console.log('|---|---|---|---|---|')
  for (const [name, buyer] of [
    ['account and offer elsewhere', elsewhere],
    ["account on the sleeping replica's master", onSleeper],
  ] as const) {
    for (const connections of [1, 32]) {
      const result = await runWrk(target(gateway, buyer), body, connections, Number(seconds), stack.logDir)
      if (result.errors > 0) throw new Error(`${name}: ${result.errors} errors`)
      console.log(
        `| ${name} | ${connections} | ${result.p50Ms.toFixed(3)} | ${result.p99Ms.toFixed(3)} | ${result.rps.toFixed(0)} |`,
      )
    }
  }
} finally {
  await stack.stop()
  store.close()
  cluster.stop()
}
