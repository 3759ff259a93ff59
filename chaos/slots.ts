// What an operator does to a Redis Cluster by hand, done to the local one the chaos suite runs on:
// find who serves a slot, kill a master, and move a slot from one master to another the way
// `redis-cli --cluster reshard` moves it (SETSLOT IMPORTING and MIGRATING, MIGRATE of its keys in
// batches, SETSLOT NODE), with a pause between batches so requests run while the slot is split.
import Redis from 'ioredis'
import type { ClusterNode, LocalCluster } from '../src/redis/local-cluster.ts'

/** A connection to one node that fails at once if the node is gone (it may have been killed). */
function direct(port: number): Redis {
  const redis = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  redis.on('error', () => {})
  return redis
}

async function ask<T>(port: number, call: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = direct(port)
  try {
    return await call(redis)
  } finally {
    redis.disconnect()
  }
}

/** The slot a key hashes to, asked of the first node that answers (masters may have been killed). */
export async function slotOf(cluster: LocalCluster, key: string): Promise<number> {
  for (const node of [...cluster.nodes, ...cluster.replicas]) {
    const slot = await ask(node.port, (r) => r.cluster('KEYSLOT', key)).catch(() => null)
    if (slot !== null) return Number(slot)
  }
  throw new Error('no node of the cluster answers')
}

/** The node (of masters and replicas) that serves `slot` now, asked of a node that is alive. */
export async function ownerOf(
  cluster: LocalCluster,
  slot: number,
  alive: ClusterNode[],
): Promise<ClusterNode> {
  const ranges = await ask(alive[0]!.port, (r) => r.cluster('SLOTS'))
  const range = ranges.find(([from, to]) => slot >= from && slot <= to)
  const port = range?.[2]?.[1]
  const node = [...cluster.nodes, ...cluster.replicas].find((n) => n.port === port)
  if (!node) throw new Error(`no node serves slot ${slot}`)
  return node
}

/** Whether a node is a master serving slots and sees the whole cluster as ok. */
export async function servingMaster(node: ClusterNode): Promise<boolean> {
  return ask(node.port, async (r) => {
    const role = await r.info('replication')
    const state = await r.cluster('INFO')
    return role.includes('role:master') && state.includes('cluster_state:ok')
  })
}

export interface SlotMove {
  /** Keys moved, and in how many MIGRATE batches. */
  keys: number
  batches: number
}

/**
 * Moves `slot` from master `from` to master `to` in about `batches` MIGRATEs of equal size,
 * awaiting `between()` after each. MIGRATE without REPLACE: a key already on `to` (something wrote it there
 * while the slot was split) fails the move with BUSYKEY instead of being overwritten.
 */
export async function moveSlot(
  cluster: LocalCluster,
  slot: number,
  from: ClusterNode,
  to: ClusterNode,
  options: { batches: number; between: () => Promise<void> },
): Promise<SlotMove> {
  const source = direct(from.port)
  const target = direct(to.port)
  try {
    const fromId = String(await source.cluster('MYID'))
    const toId = String(await target.cluster('MYID'))
    // Importing first, as redis-cli does: a client sent on by ASK finds the target ready.
    await target.cluster('SETSLOT', slot, 'IMPORTING', fromId)
    await source.cluster('SETSLOT', slot, 'MIGRATING', toId)
    // No key is added to the source while the slot migrates (Redis sends a new key to the target).
    const count = Number(await source.cluster('COUNTKEYSINSLOT', slot))
    const batch = Math.max(1, Math.ceil(count / options.batches))
    const moved: SlotMove = { keys: 0, batches: 0 }
    for (;;) {
      const keys = (await source.cluster('GETKEYSINSLOT', slot, batch)) as string[]
      if (keys.length === 0) break
      await source.call('MIGRATE', '127.0.0.1', to.port, '', 0, 10_000, 'KEYS', ...keys)
      moved.keys += keys.length
      moved.batches++
      await options.between()
    }
    // The target first, then the source, then every other master, as redis-cli orders it.
    await target.cluster('SETSLOT', slot, 'NODE', toId)
    await source.cluster('SETSLOT', slot, 'NODE', toId)
    for (const other of cluster.nodes)
      if (other !== from && other !== to)
        await ask(other.port, (r) => r.cluster('SETSLOT', slot, 'NODE', toId))
    return moved
  } finally {
    source.disconnect()
    target.disconnect()
  }
}
