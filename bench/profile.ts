// Profiles the gateway under one benchmark load: the stack of bench/run.ts, but the gateway run
// from source under `bun --cpu-prof`, so the profile names our functions and files.
//   bun bench/profile.ts buffered [connections=1] [seconds=10]
//   bun bench/profile.ts stream [concurrency=1] [seconds=10]
// Prints where the profile (.cpuprofile and its markdown summary) was written.
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { BenchStack, fundedBuyer, postOffer, ROOT, targets } from './stack.ts'
import { runStreamClient } from './streams.ts'
import { runWrk } from './wrk.ts'

const [mode = 'buffered', level = '1', seconds = '10'] = process.argv.slice(2)
const messages = [{ role: 'user', content: 'Say hello to the benchmark.' }]
const body = { model: 'llama-3.3-70b', messages, max_tokens: 64 }

const stack = new BenchStack()
try {
  await stack.startRedis()
  const sim = await stack.startSim('sim')
  const profileDir = join(stack.logDir, 'profile')
  const gateway = await stack.startGateway('gateway', sim.url, [
    process.execPath,
    '--cpu-prof',
    '--cpu-prof-md',
    `--cpu-prof-dir=${profileDir}`,
    join(ROOT, 'src/main.ts'),
    'serve',
  ])
  await postOffer(gateway, sim, 'bench-supplier', 50)
  const buyer = await fundedBuyer(gateway)
  const peer = { url: sim.url, service: sim.service } // unused: only the gateway is loaded
  const target = targets(sim, 'bench-supplier', peer, gateway, buyer).gateway
  if (mode === 'stream') {
    const job = {
      mode: 'loop' as const,
      url: target.url,
      headers: target.headers,
      body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
      expectTokens: 24,
      concurrency: Number(level),
      durationMs: Number(seconds) * 1000,
    }
    console.log(JSON.stringify(await runStreamClient(job)))
  } else {
    console.log(
      JSON.stringify(
        await runWrk(target, JSON.stringify(body), Number(level), Number(seconds), stack.logDir),
      ),
    )
  }
  await gateway.service.stop()
  for (const file of readdirSync(profileDir)) console.log(join(profileDir, file))
} finally {
  await stack.stop()
}
