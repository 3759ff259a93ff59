// Where the CPU goes per request: the same stack as bench/run.ts (compiled gateway, the peer, the
// simulated supplier, Redis), buffered chat at one load level through the peer and through the
// gateway, with each process's CPU time (user + system, from /proc) divided by the requests served.
// On a shared 2-core machine throughput is CPU per request, so this says what a target costs
// and which process pays it.
//   bun bench/cpu.ts [connections=32] [seconds=6] [rounds=2] [name=binary[@tcp] ...]
// Each name=binary adds another gateway build (e.g. base=/tmp/svc-gateway-base) on the same Redis
// and supplier, its own key prefix and buyer; rounds run every target, in an order rotated one place a round, and the medians
// close the output, then each named build's ratios to the gateway round by round: an A/B of a
// change on this noisy machine, in one sitting. `@tcp` has that
// gateway reach Redis over loopback TCP instead of the Unix socket (tcp=dist/svc-gateway@tcp).
import { cpuMs, minorFaults } from './procs.ts'
import { BenchStack, fundedBuyer, postOffer, type RedisTransport, type Target, targets } from './stack.ts'
import { inRoundOrder, median } from './stats.ts'
import { runWrk } from './wrk.ts'

const [connections = '32', seconds = '6', rounds = '2', ...others] = process.argv.slice(2)
const builds = others.map((arg) => {
  const [name, spec] = arg.split('=')
  const [binary, over = 'unix'] = (spec ?? '').split('@')
  if (!name || !binary || (over !== 'unix' && over !== 'tcp'))
    throw new Error(`expected name=binary[@tcp], got ${arg}`)
  return { name, binary, over: over as RedisTransport }
})
/** Redis's top-level commands so far (commands a script calls are counted apart, under their own names). */
function redisCalls(port: number): Record<string, number> {
  const info = Bun.spawnSync(['redis-cli', '-p', String(port), 'info', 'commandstats']).stdout.toString()
  const calls: Record<string, number> = {}
  for (const m of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) calls[m[1]!] = Number(m[2])
  return calls
}

/** Redis's socket reads and writes so far: how many commands each read carries is how well clients pipeline. */
function redisIo(port: number): { reads: number; writes: number } {
  const info = Bun.spawnSync(['redis-cli', '-p', String(port), 'info', 'stats']).stdout.toString()
  const field = (name: string) => Number(new RegExp(`${name}:(\\d+)`).exec(info)?.[1] ?? 0)
  return { reads: field('total_reads_processed'), writes: field('total_writes_processed') }
}

function redisPid(port: number): number {
  const out = Bun.spawnSync(['pgrep', '-f', `redis-server .*:${port}`])
    .stdout.toString()
    .trim()
  return Number(out.split('\n')[0])
}

const body = JSON.stringify({
  model: 'llama-3.3-70b',
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 64,
})
const stack = new BenchStack()
try {
  await stack.startRedis()
  const sim = await stack.startSim('sim')
  const gateway = await stack.startGateway('gateway', sim.url)
  const peer = await stack.startPeer('peer')
  await postOffer(gateway, sim, 'bench-supplier', 50)
  const buyer = await fundedBuyer(gateway)
  const standard = targets(sim, 'bench-supplier', peer, gateway, buyer)
  const byName: Record<string, Target> = { peer: standard.peer, gateway: standard.gateway }
  for (const build of builds) {
    const other = await stack.startGateway(build.name, sim.url, [build.binary, 'serve'], build.over)
    await postOffer(other, sim, 'bench-supplier', 50)
    byName[build.name] = targets(sim, 'bench-supplier', peer, other, await fundedBuyer(other)).gateway
  }
  const procs = { sim: sim.service.pid, redis: redisPid(stack.redis.port) }
  const seen: Record<string, { rps: number[]; own: number[]; redis: number[]; faults: number[] }> = {}
  for (let r = 0; r < Number(rounds); r++) {
    for (const [name, target] of inRoundOrder(Object.entries(byName), r)) {
      await runWrk(target, body, Number(connections), 1, stack.logDir) // warm-up
      const pids = { [name]: target.pid, ...procs }
      const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuMs(pid)]))
      const faultsBefore = minorFaults(target.pid)
      const callsBefore = redisCalls(stack.redis.port)
      const ioBefore = redisIo(stack.redis.port)
      const result = await runWrk(target, body, Number(connections), Number(seconds), stack.logDir)
      const after = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuMs(pid)]))
      const faults = (minorFaults(target.pid) - faultsBefore) / result.requests
      const us = (k: string) => (1000 * (after[k]! - before[k]!)) / result.requests
      const perRequest = Object.keys(pids).map((k) => `${k} ${us(k).toFixed(0)} µs`)
      const calls = Object.entries(redisCalls(stack.redis.port))
        .map(([command, n]) => [command, (n - (callsBefore[command] ?? 0)) / result.requests] as const)
        .filter(([command, n]) => n >= 0.01 && command !== 'info')
        .map(([command, n]) => `${command} ${n.toFixed(2)}`)
      console.log(
        `${name.padEnd(8)} ${Math.round(result.rps)} req/s, CPU per request: ${perRequest.join(', ')}; ${faults.toFixed(2)} page faults per request`,
      )
      seen[name] ??= { rps: [], own: [], redis: [], faults: [] }
      seen[name].rps.push(result.rps)
      seen[name].own.push(us(name))
      seen[name].redis.push(us('redis'))
      seen[name].faults.push(faults)
      if (calls.length > 0) {
        const io = redisIo(stack.redis.port)
        const per = (n: number) => (n / result.requests).toFixed(2)
        console.log(`         Redis commands per request: ${calls.join(', ')}`)
        console.log(
          `         Redis socket reads per request ${per(io.reads - ioBefore.reads)}, writes ${per(io.writes - ioBefore.writes)}`,
        )
      }
    }
  }
  console.log(`medians of ${rounds} rounds:`)
  for (const [name, m] of Object.entries(seen)) {
    console.log(
      `${name.padEnd(8)} ${Math.round(median(m.rps))} req/s, own ${median(m.own).toFixed(0)} µs, redis ${median(m.redis).toFixed(0)} µs, ${median(m.faults).toFixed(2)} page faults per request`,
    )
  }
  // On shared cores a round's load moves every target's figures together: a build is read against
  // this tree's gateway round by round, not only by the medians of rounds run at different loads.
  const own = seen.gateway!
  for (const build of builds) {
    const m = seen[build.name]!
    const cpu = m.own.map((us, r) => us / own.own[r]!)
    const rps = m.rps.map((n, r) => n / own.rps[r]!)
    console.log(
      `${build.name} ÷ gateway by round: own CPU ${cpu.map((x) => x.toFixed(2)).join(', ')} (median ${median(cpu).toFixed(2)}, lower in ${cpu.filter((x) => x < 1).length} of ${cpu.length}); req/s ${rps.map((x) => x.toFixed(2)).join(', ')} (median ${median(rps).toFixed(2)})`,
    )
  }
} finally {
  await stack.stop()
}
