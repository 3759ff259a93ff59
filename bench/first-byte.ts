// One client's latency through gateway builds side by side: buffered chat's p50 (wrk) and a stream's
// first body bytes (bench/stream-client.ts), each against the simulated supplier called directly
// in the same rounds. On the shared machine an A/B of a change on the request path is read here,
// the builds interleaved round by round on one Redis and one supplier.
//   bun bench/first-byte.ts [seconds=2] [rounds=5] name=binary ...   (a .ts entry runs under bun)
import { BenchStack, fundedBuyer, postOffer, type Target, targets } from './stack.ts'
import { inRoundOrder, median } from './stats.ts'
import { runStreamClient } from './streams.ts'
import { runWrk } from './wrk.ts'

const [seconds = '2', rounds = '5', ...builds] = process.argv.slice(2)
if (builds.length === 0) throw new Error('name at least one build: name=binary')
const messages = [{ role: 'user', content: 'Say hello to the benchmark.' }]
const request = { model: 'llama-3.3-70b', messages, max_tokens: 64 }
const bufferedBody = JSON.stringify(request)
const streamBody = JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } })
const FAST_TOKENS = 24 // the simulated supplier's default completion length

const stack = new BenchStack()
try {
  await stack.startRedis()
  const sim = await stack.startSim('sim')
  const byName: Record<string, Target> = {}
  for (const build of builds) {
    const [name, binary] = build.split('=')
    if (!name || !binary) throw new Error(`expected name=binary, got ${build}`)
    const command = binary.endsWith('.ts') ? [process.execPath, binary, 'serve'] : [binary, 'serve']
    const gateway = await stack.startGateway(name, sim.url, command)
    await postOffer(gateway, sim, 'bench-supplier', 50)
    const peer = { url: sim.url, service: sim.service } // unused: no peer here
    const all = targets(sim, 'bench-supplier', peer, gateway, await fundedBuyer(gateway))
    byName.direct ??= all.direct
    byName[name] = all.gateway
  }
  const seen: Record<string, { p50: number[]; ttfb: number[] }> = {}
  for (let r = 0; r < Number(rounds); r++) {
    for (const [name, target] of inRoundOrder(Object.entries(byName), r)) {
      const buffered = await runWrk(target, bufferedBody, 1, Number(seconds), stack.logDir)
      const streamed = await runStreamClient({
        mode: 'loop',
        url: target.url,
        headers: target.headers,
        body: streamBody,
        expectTokens: FAST_TOKENS,
        concurrency: 1,
        durationMs: Number(seconds) * 1000,
      })
      seen[name] ??= { p50: [], ttfb: [] }
      seen[name].p50.push(buffered.p50Ms)
      seen[name].ttfb.push(streamed.ttfbP50)
      const failures = buffered.errors + streamed.errors + streamed.lost + streamed.unfinished
      console.log(
        `${name.padEnd(8)} buffered p50 ${buffered.p50Ms.toFixed(3)} ms, stream first bytes p50 ${streamed.ttfbP50.toFixed(3)} ms${failures > 0 ? `, ${failures} failed or lost` : ''}`,
      )
    }
  }
  const direct = seen.direct!
  const added = (values: number[], base: number[]) => (median(values) - median(base)).toFixed(3)
  console.log(`medians of ${rounds} rounds (added: over the supplier called directly):`)
  for (const [name, m] of Object.entries(seen)) {
    if (name === 'direct') continue
    console.log(
      `${name.padEnd(8)} buffered p50 +${added(m.p50, direct.p50)} ms, stream first bytes p50 +${added(m.ttfb, direct.ttfb)} ms`,
    )
  }
} finally {
  await stack.stop()
}
