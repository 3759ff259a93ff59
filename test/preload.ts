// Runs once per test process (a parallel worker under --no-isolate runs many files after it): the
// redis-server the files share (or the REDIS_URL given). Under `--parallel` a keeper process holds
// one for the whole run and each worker takes the next of its databases; alone, the process starts
// its own. Files are isolated by key prefix (see helpers/stack.ts); a file that reads or changes
// server-wide state takes a server of its own (ownRedis in helpers/stack.ts).
// TEST_REDIS_TOPOLOGY=cluster puts the same files on a local 3-master Cluster instead, one per run
// (or per process alone), where the prefixes' hash tags alone keep files apart.
import { afterAll } from 'bun:test'
import Redis from 'ioredis'
import { setTokenCountTimeoutMs } from '../src/inference/token-count.ts'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { startLocalRedis } from '../src/redis/local-server.ts'
import { parallelRun, runScoped } from './helpers/run-scope.ts'
import { recordRunRedis } from './helpers/test-redis.ts'

// The tokenizer worker's cold start counts against a count's deadline (10 s in production); on a
// loaded machine it alone can pass that, and a test would fail on speed. A test's limit bounds it.
setTokenCountTimeoutMs(120_000)

// Each file reads it from test-redis.ts, whatever a file before it left in process.env.
recordRunRedis(process.env.TEST_REDIS_URL || (await runRedis()))

async function runRedis(): Promise<string> {
  const run = parallelRun()
  const topology = process.env.TEST_REDIS_TOPOLOGY ?? 'single'
  if (topology !== 'single' && topology !== 'cluster')
    throw new Error(`TEST_REDIS_TOPOLOGY is single or cluster, not ${topology}`)
  const cluster = topology === 'cluster'
  if (process.env.REDIS_URL) return process.env.REDIS_URL
  if (run && cluster) {
    const keeper = `${import.meta.dir}/helpers/redis-cluster-keeper.ts`
    return (await runScoped<{ url: string }>('redis-cluster', keeper, run)).url
  }
  if (run) {
    const keeper = `${import.meta.dir}/helpers/redis-keeper.ts`
    const { url, databases } = await runScoped<{ url: string; databases: number }>('redis', keeper, run)
    return `${url}/${await nextDatabase(url, databases)}`
  }
  const redis = cluster ? await startLocalCluster(3) : await startLocalRedis()
  afterAll(() => redis.stop())
  return redis.url
}

/** The next unused database of the run's server (1 up, round again past the last). */
async function nextDatabase(url: string, databases: number): Promise<number> {
  const counter = new Redis(url, { lazyConnect: true })
  try {
    return ((await counter.incr('test:databases-taken')) % (databases - 1)) + 1
  } finally {
    counter.disconnect()
  }
}
