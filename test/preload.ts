// Runs once before the test files: one real redis-server on a free port in a fresh folder (or the
// REDIS_URL given), shared by every file. Files are isolated by key prefix (see helpers/stack.ts).
import { afterAll } from 'bun:test'
import { setTokenCountTimeoutMs } from '../src/inference/token-count.ts'
import { startLocalRedis } from '../src/redis/local-server.ts'

// The tokenizer worker's cold start counts against a count's deadline (10 s in production); on a
// loaded machine it alone can pass that, and a test would fail on speed. A test's limit bounds it.
setTokenCountTimeoutMs(120_000)

if (!process.env.TEST_REDIS_URL) {
  if (process.env.REDIS_URL) {
    process.env.TEST_REDIS_URL = process.env.REDIS_URL
  } else {
    const redis = await startLocalRedis()
    process.env.TEST_REDIS_URL = redis.url
    afterAll(() => redis.stop())
  }
}
