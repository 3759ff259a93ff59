// Runs before each test file: the redis-server the files share (or the REDIS_URL given). Under
// `--parallel` a keeper process holds one for the whole run, since this runs once per file there;
// alone, a file starts its own. Files are isolated by key prefix (see helpers/stack.ts); a file
// that reads or changes server-wide state takes a server of its own (ownRedis in helpers/stack.ts).
import { afterAll } from 'bun:test'
import { setTokenCountTimeoutMs } from '../src/inference/token-count.ts'
import { startLocalRedis } from '../src/redis/local-server.ts'
import { parallelRun, runScoped } from './helpers/run-scope.ts'

// The tokenizer worker's cold start counts against a count's deadline (10 s in production); on a
// loaded machine it alone can pass that, and a test would fail on speed. A test's limit bounds it.
setTokenCountTimeoutMs(120_000)

if (!process.env.TEST_REDIS_URL) {
  const run = parallelRun()
  if (process.env.REDIS_URL) {
    process.env.TEST_REDIS_URL = process.env.REDIS_URL
  } else if (run) {
    const { url } = await runScoped<{ url: string }>(
      'redis',
      `${import.meta.dir}/helpers/redis-keeper.ts`,
      run,
    )
    process.env.TEST_REDIS_URL = url
  } else {
    const redis = await startLocalRedis()
    process.env.TEST_REDIS_URL = redis.url
    afterAll(() => redis.stop())
  }
}
