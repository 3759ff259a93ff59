// Calibrates the open-streams figures: memory per open stream of a minimal Bun passthrough
// (bench/floor-proxy.ts) in front of the slow-paced simulated supplier, and, with
// --no-fetch-limit, what Bun's default cap of 256 concurrent fetches does to 2,000 streams.
//   bun bench/floor.ts [--no-fetch-limit] [streams=2000]
import { join } from 'node:path'
import { freePort } from '../src/redis/local-server.ts'
import { rssBytes, spawnService, waitForHttp } from './procs.ts'
import { BenchStack } from './stack.ts'
import { runStreamClient } from './streams.ts'

const noLimit = process.argv.includes('--no-fetch-limit')
const streams = Number(process.argv.slice(2).find((a) => /^\d+$/.test(a)) ?? 2000)
const stack = new BenchStack()
try {
  const sim = await stack.startSim('sim-slow', { SIM_TOKENS_PER_SECOND: '2', SIM_OUTPUT_TOKENS: '20' })
  const port = freePort()
  const proxy = spawnService('floor-proxy', [process.execPath, join(import.meta.dir, 'floor-proxy.ts')], {
    logDir: stack.logDir,
    env: {
      PORT: String(port),
      UPSTREAM_URL: sim.url,
      ...(noLimit ? {} : { BUN_CONFIG_MAX_HTTP_REQUESTS: '8192' }),
    },
  })
  const url = `http://127.0.0.1:${port}/v1/chat/completions`
  await waitForHttp(proxy, url)
  const job = (n: number) => ({
    mode: 'open' as const,
    url,
    headers: { 'content-type': 'application/json', authorization: 'Bearer bench-supplier' },
    body: JSON.stringify({
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
      max_tokens: 64,
      stream: true,
      stream_options: { include_usage: true },
    }),
    expectTokens: 20,
    streams: n,
    rampMs: Math.max(200, n),
  })
  await runStreamClient(job(noLimit ? 50 : 200)) // warm-up
  await Bun.sleep(500)
  const before = await rssBytes(proxy.pid)
  let open = before
  const result = await runStreamClient(job(streams), async () => {
    await Bun.sleep(500)
    open = await rssBytes(proxy.pid)
  })
  console.log(
    JSON.stringify({
      fetchLimit: noLimit ? 'default' : 8192,
      kbPerStream: (open - before) / 1024 / streams,
      ...result,
    }),
  )
} finally {
  await stack.stop()
}
