// Keeps one redis-server for a parallel test run (see run-scope.ts): every file shares it, each in
// a database of its own (test/preload.ts), so a file's keyspace scans (its audits) walk its own keys
// only; it stops once the run's coordinator has exited.
import { startLocalRedis } from '../../src/redis/local-server.ts'
import { keepForRun } from './run-scope.ts'

/** More than the suite has files; database 0 only counts them out. */
const DATABASES = 1_024

await keepForRun(async () => {
  const redis = await startLocalRedis(['--databases', String(DATABASES)])
  return { value: { url: redis.url, databases: DATABASES }, stop: () => redis.stop() }
})
