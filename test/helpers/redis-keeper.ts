// Keeps one redis-server for a parallel test run (see run-scope.ts): every file shares it, each
// under its own key prefix; it stops once the run's coordinator has exited.
import { startLocalRedis } from '../../src/redis/local-server.ts'
import { keepForRun } from './run-scope.ts'

await keepForRun(async () => {
  const redis = await startLocalRedis()
  return { value: { url: redis.url }, stop: () => redis.stop() }
})
