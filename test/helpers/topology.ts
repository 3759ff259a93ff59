// Which Redis the suite runs on: `single` (one redis-server, the default) or `cluster` (a local
// 3-master Cluster), from TEST_REDIS_TOPOLOGY.

export type TestTopology = 'single' | 'cluster'

export function testTopology(): TestTopology {
  const topology = process.env.TEST_REDIS_TOPOLOGY ?? 'single'
  if (topology !== 'single' && topology !== 'cluster')
    throw new Error(`TEST_REDIS_TOPOLOGY is 'single' or 'cluster', not '${topology}'`)
  return topology
}
