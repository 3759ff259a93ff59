// What telling a cost only once a replica has its clear costs (SVC_CLEAR_REPLICAS=1): one Redis
// with a replica of its own, two compiled gateways on it under their own prefixes, one without and
// one with the wait, buffered chat through each in rotated order, at 1 client and at 32.
//   bun bench/clear-replicas.ts [seconds=4] [rounds=3]
import { startLocalRedis } from '../src/redis/local-server.ts'
import { type BenchGateway, BenchStack, fundedBuyer, postOffer, type Target } from './stack.ts'
import { inRoundOrder, median } from './stats.ts'
import { runWrk } from './wrk.ts'

const [seconds = '4', rounds = '3'] = process.argv.slice(2)
const body = JSON.stringify({
  model: 'llama-3.3-70b',
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 64,
})
/** WAITs Redis has run so far: how many requests share one shows the rounds' grouping. */
function waits(port: number): number {
  const info = Bun.spawnSync(['redis-cli', '-p', String(port), 'info', 'commandstats']).stdout.toString()
  return Number(/cmdstat_wait:calls=(\d+)/.exec(info)?.[1] ?? 0)
}

/** The clears the gateway's journal keeps now (its /metrics gauge). */
async function journalClears(gateway: BenchGateway): Promise<number> {
  const response = await fetch(`${gateway.url}/metrics`, {
    headers: { authorization: `Bearer ${gateway.adminToken}` },
  })
  return Number(/^svc_journal_clears (\d+)$/m.exec(await response.text())?.[1] ?? Number.NaN)
}

const stack = new BenchStack()
const master = await stack.startRedis()
// A replica linked now is synced at once, not after Redis's default 5 s wait for others.
Bun.spawnSync(['redis-cli', '-p', String(master.port), 'config', 'set', 'repl-diskless-sync-delay', '0'])
const replica = await startLocalRedis(['--replicaof', '127.0.0.1', String(master.port)])
try {
  const sim = await stack.startSim('sim')
  const byName: Record<string, Target> = {}
  const gateways: Record<string, BenchGateway> = {}
  for (const [name, env] of [
    ['told-at-once', {}],
    ['told-replicated', { SVC_CLEAR_REPLICAS: '1' }],
  ] as const) {
    const gateway = await stack.startGateway(name, sim.url, undefined, 'unix', env)
    gateways[name] = gateway
    await postOffer(gateway, sim, 'bench-supplier', 50)
    const buyer = await fundedBuyer(gateway)
    byName[name] = {
      name: 'gateway',
      url: `${gateway.url}/v1/chat/completions`,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${buyer.apiKey}` },
      pid: gateway.service.pid,
    }
  }
  const results: Record<
    string,
    { p50: number[]; p99: number[]; rps: number[]; perWait: number[]; keptSeconds: number[] }
  > = {}
  for (const connections of [1, 32]) {
    for (let round = 0; round < Number(rounds); round++) {
      for (const name of inRoundOrder(Object.keys(byName), round)) {
        const target = byName[name]!
        await runWrk(target, body, connections, 1, stack.logDir)
        const waitsBefore = waits(master.port)
        const result = await runWrk(target, body, connections, Number(seconds), stack.logDir)
        const waited = waits(master.port) - waitsBefore
        // Read the moment the load ends: the clears kept then, over the rate they came at, is how
        // long the journal keeps one (its window, or until the replica acknowledges it).
        const kept = await journalClears(gateways[name]!)
        if (result.errors > 0) throw new Error(`${name}: ${result.errors} errors`)
        const key = `${name} @${connections}`
        results[key] ??= { p50: [], p99: [], rps: [], perWait: [], keptSeconds: [] }
        const row = results[key]
        row.p50.push(result.p50Ms)
        row.p99.push(result.p99Ms)
        row.rps.push(result.rps)
        if (waited > 0) row.perWait.push(result.requests / waited)
        row.keptSeconds.push(kept / result.rps)
      }
    }
  }
  console.log(
    '| gateway | clients | p50 ms | p99 ms | requests/s | requests per WAIT | journal keeps a clear, s |',
  )
  console.log('|---|---|---|---|---|---|---|')
  for (const [key, row] of Object.entries(results)) {
    const [name, at] = key.split(' @')
    console.log(
      `| ${name} | ${at} | ${median(row.p50).toFixed(3)} | ${median(row.p99).toFixed(3)} | ${median(row.rps).toFixed(0)} | ${row.perWait.length ? median(row.perWait).toFixed(1) : ''} | ${median(row.keptSeconds).toFixed(2)} |`,
    )
  }
} finally {
  await stack.stop()
  await replica.stop()
}
