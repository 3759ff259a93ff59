// One client, one HTTP client for both kinds of request: a buffered chat's answer and a stream's
// first body bytes, sent back to back and then paced (a pause after each request, as an agent
// that reads an answer before it asks again), through the gateway and to the supplier directly.
// bench/first-byte.ts reads buffered calls with wrk and streams with the stream client; here both
// go through Bun's fetch in this process, so the two kinds differ only in what the gateway does.
//   bun bench/first-byte-paced.ts [requests=1500] [rounds=5] [pauseMs=3] [binary=dist/svc-gateway]
import { BenchStack, fundedBuyer, GATEWAY_BINARY, postOffer, type Target, targets } from './stack.ts'
import { median } from './stats.ts'

const [requests = '1500', rounds = '5', pause = '3', binary = GATEWAY_BINARY] = process.argv.slice(2)
const request = {
  model: 'llama-3.3-70b',
  messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
  max_tokens: 64,
}
const bodies = {
  buffered: JSON.stringify(request),
  stream: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
}
type Kind = keyof typeof bodies

/** The p50 of the time to the first body bytes of `count` requests sent one after another. */
async function firstBytesP50(target: Target, kind: Kind, count: number, pauseMs: number): Promise<number> {
  const times: number[] = []
  for (let i = 0; i < count; i++) {
    const start = performance.now()
    const response = await fetch(target.url, { method: 'POST', headers: target.headers, body: bodies[kind] })
    if (response.status !== 200) throw new Error(`${target.name} ${kind}: status ${response.status}`)
    let first = 0
    for await (const _ of response.body!) if (first === 0) first = performance.now() - start
    times.push(first)
    if (pauseMs > 0) await Bun.sleep(pauseMs)
  }
  return median(times)
}

const stack = new BenchStack()
try {
  await stack.startRedis()
  const sim = await stack.startSim('sim')
  const gateway = await stack.startGateway('gateway', sim.url, [binary, 'serve'])
  await postOffer(gateway, sim, 'bench-supplier', 50)
  const peer = { url: sim.url, service: sim.service } // unused: no peer here
  const all = targets(sim, 'bench-supplier', peer, gateway, await fundedBuyer(gateway))
  const seen: Record<string, number[]> = {}
  const paces = [0, Number(pause)]
  for (let r = 0; r < Number(rounds); r++) {
    for (const pauseMs of paces) {
      for (const kind of ['stream', 'buffered'] as Kind[]) {
        for (const target of r % 2 === 0 ? [all.gateway, all.direct] : [all.direct, all.gateway]) {
          // Paced rounds take longer a request: fewer of them fill the same time.
          const count = pauseMs > 0 ? Math.ceil(Number(requests) / 5) : Number(requests)
          const key = `${pauseMs} ${kind} ${target.name}`
          const p50 = await firstBytesP50(target, kind, count, pauseMs)
          seen[key] = [...(seen[key] ?? []), p50]
        }
      }
    }
  }
  console.log(`medians of ${rounds} rounds' p50 (ms; added: over the supplier called directly):`)
  for (const pauseMs of paces) {
    const added = (kind: Kind) =>
      (median(seen[`${pauseMs} ${kind} gateway`]!) - median(seen[`${pauseMs} ${kind} direct`]!)).toFixed(3)
    const how = pauseMs > 0 ? `paced (${pauseMs} ms after each)` : 'back to back'
    console.log(
      `${how}: buffered answer +${added('buffered')}, stream first bytes +${added('stream')}` +
        ` (direct ${median(seen[`${pauseMs} buffered direct`]!).toFixed(3)} and ${median(seen[`${pauseMs} stream direct`]!).toFixed(3)})`,
    )
  }
} finally {
  await stack.stop()
}
