// Real redis-server processes in the modes REDIS_URL names beyond one server: a Cluster of masters
// joined as `redis-cli --cluster create` joins them, and plain servers for a Sentinel to watch.
import Redis from 'ioredis'
import {
  type ClusterNode,
  clusterNode,
  type LocalCluster,
  redisCli,
  startLocalCluster,
} from '../../src/redis/local-cluster.ts'
import { testPrefix } from './stack.ts'

export type RedisServer = ClusterNode
export type RedisCluster = LocalCluster
export { clusterNode as redisServer, redisCli, startLocalCluster as startRedisCluster }

export async function until(what: string, check: () => Promise<boolean>, ms = 15_000) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return
    await Bun.sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

/** A fresh test prefix whose hash tag's slot (so its whole keyspace) the given master serves. */
export async function prefixOn(node: RedisServer): Promise<string> {
  const direct = new Redis(node.port, '127.0.0.1', { lazyConnect: true })
  try {
    // Each range names its master first.
    const served = (await direct.cluster('SLOTS')).filter(([, , master]) => master?.[1] === node.port)
    for (;;) {
      const prefix = testPrefix()
      const slot = await direct.cluster('KEYSLOT', prefix)
      if (served.some(([from, to]) => slot >= from && slot <= to)) return prefix
    }
  } finally {
    direct.disconnect()
  }
}
