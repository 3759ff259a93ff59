// Keeps one local 3-master Redis Cluster for a parallel test run under TEST_REDIS_TOPOLOGY=cluster
// (see run-scope.ts): every file shares it, kept apart by its prefix's hash tag alone (a Cluster
// has no databases); it stops once the run's coordinator has exited.
import { startLocalCluster } from '../../src/redis/local-cluster.ts'
import { keepForRun } from './run-scope.ts'

await keepForRun(async () => {
  const cluster = await startLocalCluster(3)
  return { value: { url: cluster.url }, stop: async () => cluster.stop() }
})
