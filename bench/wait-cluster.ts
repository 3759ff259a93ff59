// What `WAIT 1` after each money write would cost on a Cluster with a replica per master: writes
// on one slot from `concurrency` loops over the gateway's Cluster store (one connection per
// master, shared), for `seconds` each way, without and with a `WAIT 1 <timeout>` on the same
// connection after each write. A write stands in for a clear (one call on the market's slot).
//   bun bench/wait-cluster.ts [seconds=5] [concurrency=64]
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { createStore } from '../src/redis/store.ts'

const seconds = Number(process.argv[2] ?? 5)
const concurrency = Number(process.argv[3] ?? 64)
const cluster = await startLocalCluster(3, [], { replicas: true })
const store = createStore(cluster.url, { name: 'svc-bench-wait' })
await store.whenReady(15_000)
const key = 'bench:{wait}:market'
const slot = Number(await store.call('CLUSTER', 'KEYSLOT', key))
const ranges = (await store.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][]
const port = ranges.find(([from, to]) => slot >= from && slot <= to)![2][1]
const master = (await store.masters()).find(
  (m) => (m as unknown as { options: { port: number } }).options.port === port,
)!

async function run(wait: boolean) {
  const latencies: number[] = []
  const end = performance.now() + seconds * 1000
  let unacked = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const started = performance.now()
        await store.hincrby(key, 'n', 1)
        if (wait && Number(await master.call('WAIT', 1, 100)) < 1) unacked++
        latencies.push(performance.now() - started)
      }
    }),
  )
  latencies.sort((a, b) => a - b)
  const at = (q: number) => Math.round(latencies[Math.floor(q * (latencies.length - 1))]! * 100) / 100
  return { writesPerSecond: Math.round(latencies.length / seconds), p50Ms: at(0.5), p99Ms: at(0.99), unacked }
}

const without = await run(false)
const withWait = await run(true)
console.log(JSON.stringify({ seconds, concurrency, without, withWait }, null, 1))
store.close()
cluster.stop()
