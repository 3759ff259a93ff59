// Runs before each test file: the redis-server the files share (or the REDIS_URL given). Under
// `--parallel` a keeper process holds one for the whole run, since this runs once per file there,
// and each file takes the next of its databases; alone, a file starts its own. Files are isolated by key prefix (see helpers/stack.ts); a file
// that reads or changes server-wide state takes a server of its own (ownRedis in helpers/stack.ts).
// TEST_REDIS_TOPOLOGY=cluster puts the same files on a local 3-master Cluster instead, one per run
// (or per file alone), where the prefixes' hash tags alone keep files apart.
import { afterAll } from 'bun:test'
import Redis from 'ioredis'
import { setTokenCountTimeoutMs } from '../src/inference/token-count.ts'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { startLocalRedis } from '../src/redis/local-server.ts'
import { parallelRun, runScoped } from './helpers/run-scope.ts'

// The tokenizer worker's cold start counts against a count's deadline (10 s in production); on a
// loaded machine it alone can pass that, and a test would fail on speed. A test's limit bounds it.
setTokenCountTimeoutMs(120_000)

if (!process.env.TEST_REDIS_URL) {
  const run = parallelRun()
  const topology = process.env.TEST_REDIS_TOPOLOGY ?? 'single'
  if (topology !== 'single' && topology !== 'cluster')
    throw new Error(`TEST_REDIS_TOPOLOGY is single or cluster, not ${topology}`)
  const cluster = topology === 'cluster'
  if (process.env.REDIS_URL) {
    process.env.TEST_REDIS_URL = process.env.REDIS_URL
  } else if (run && cluster) {
    const keeper = `${import.meta.dir}/helpers/redis-cluster-keeper.ts`
    process.env.TEST_REDIS_URL = (await runScoped<{ url: string }>('redis-cluster', keeper, run)).url
  } else if (run) {
    const keeper = `${import.meta.dir}/helpers/redis-keeper.ts`
    const { url, databases } = await runScoped<{ url: string; databases: number }>('redis', keeper, run)
    process.env.TEST_REDIS_URL = `${url}/${await nextDatabase(url, databases)}`
  } else {
    const redis = cluster ? await startLocalCluster(3) : await startLocalRedis()
    process.env.TEST_REDIS_URL = redis.url
    afterAll(() => redis.stop())
  }
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
