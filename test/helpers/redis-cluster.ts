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
import { parseRedisTarget } from '../../src/redis/target.ts'
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
    for (;;) {
      const prefix = testPrefix()
      if ((await masterOf(direct, prefix)) === node.port) return prefix
    }
  } finally {
    direct.disconnect()
  }
}

/**
 * The one server that holds `key`, as a redis:// URL: the server of a single-Redis `url`, or the
 * master of a Cluster that serves the key's slot (where a MONITOR or a proxy sees every command on
 * a prefix's keys).
 */
export async function serverOf(url: string, key: string): Promise<string> {
  const target = parseRedisTarget(url)
  if (target.kind !== 'cluster') return url
  const [{ host, port }] = target.nodes as [{ host: string; port: number }]
  const direct = new Redis(port, host, { lazyConnect: true })
  try {
    return `redis://${host}:${await masterOf(direct, key)}`
  } finally {
    direct.disconnect()
  }
}

/** The port of the master that serves `key`'s slot, asked of any node of the Cluster. */
async function masterOf(direct: Redis, key: string): Promise<number> {
  const slot = await direct.cluster('KEYSLOT', key)
  // Each range names its master first.
  const range = (await direct.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to)
  const master = range?.[2]
  if (!master) throw new Error(`no master serves slot ${slot}`)
  return master[1]
}
