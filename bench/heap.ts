// Where the gateway's memory per open stream goes: the gateway from source with bench/heap-preload.ts,
// its JS heap (after a full GC) and RSS with no stream open and with `streams` open, and the object
// types that grew, per stream.
//   bun bench/heap.ts [streams=2000]
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { rssBytes } from './procs.ts'
import { BenchStack, fundedBuyer, postOffer, ROOT, targets } from './stack.ts'
import { runStreamClient } from './streams.ts'

interface HeapStats {
  heapSize: number
  objectCount: number
  objectTypeCounts: Record<string, number>
}

const streams = Number(process.argv[2] ?? 2000)
const stack = new BenchStack()
try {
  await stack.startRedis()
  const sim = await stack.startSim('sim-slow', { SIM_TOKENS_PER_SECOND: '2', SIM_OUTPUT_TOKENS: '20' })
  const heapFile = join(stack.logDir, 'heap.jsonl')
  process.env.BENCH_HEAP_FILE = heapFile
  const gateway = await stack.startGateway('gateway', sim.url, [
    process.execPath,
    '--preload',
    join(import.meta.dir, 'heap-preload.ts'),
    join(ROOT, 'src/main.ts'),
    'serve',
  ])
  await postOffer(gateway, sim, 'bench-supplier', 50)
  const buyer = await fundedBuyer(gateway)
  const peer = { url: sim.url, service: sim.service } // unused
  const target = targets(sim, 'bench-supplier', peer, gateway, buyer).gateway
  const job = (n: number) => ({
    mode: 'open' as const,
    url: target.url,
    headers: target.headers,
    body: JSON.stringify({
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'Say hello to the benchmark.' }],
      max_tokens: 64,
      stream: true,
    }),
    expectTokens: 20,
    streams: n,
    rampMs: Math.max(200, n),
  })
  const snapshot = async () => {
    const before = readFileSync(heapFile, { flag: 'a+' }).toString().split('\n').filter(Boolean).length
    gateway.service.proc.kill('SIGUSR2')
    for (;;) {
      const lines = readFileSync(heapFile).toString().split('\n').filter(Boolean)
      if (lines.length > before)
        return { heap: JSON.parse(lines.at(-1)!) as HeapStats, rss: await rssBytes(gateway.service.pid) }
      await Bun.sleep(20)
    }
  }
  await runStreamClient(job(200)) // warm-up
  await Bun.sleep(500)
  const idle = await snapshot()
  let open = idle
  await runStreamClient(job(streams), async () => {
    await Bun.sleep(500)
    open = await snapshot()
  })
  const per = (a: number, b: number) => (b - a) / streams
  const grown = Object.entries(open.heap.objectTypeCounts)
    .map(([type, n]) => [type, per(idle.heap.objectTypeCounts[type] ?? 0, n)] as const)
    .filter(([, n]) => n >= 0.5)
    .sort((a, b) => b[1] - a[1])
  console.log(`RSS per stream ${(per(idle.rss, open.rss) / 1024).toFixed(1)} KB`)
  console.log(
    `JS heap per stream (after a full GC) ${(per(idle.heap.heapSize, open.heap.heapSize) / 1024).toFixed(1)} KB`,
  )
  console.log(`objects per stream ${per(idle.heap.objectCount, open.heap.objectCount).toFixed(1)}:`)
  for (const [type, n] of grown) console.log(`  ${n.toFixed(1).padStart(6)}  ${type}`)
} finally {
  await stack.stop()
}
