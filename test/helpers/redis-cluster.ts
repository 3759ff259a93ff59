// Real redis-server processes in the modes REDIS_URL names beyond one server: a Cluster of masters
// made with `redis-cli --cluster create`, and plain servers for a Sentinel to watch.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Redis from 'ioredis'
import { freePort } from '../../src/redis/local-server.ts'
import { testPrefix } from './stack.ts'

export interface RedisServer {
  port: number
  dir: string
  /** kill -9 and remove its folder. */
  stop(): void
}

export function redisServer(args: string[]): RedisServer {
  const dir = mkdtempSync(join(tmpdir(), 'svc-topo-'))
  const port = freePort()
  const child = Bun.spawn(
    ['redis-server', '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...args],
    { stdout: 'ignore', stderr: 'ignore' },
  )
  return {
    port,
    dir,
    stop() {
      child.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

export async function until(what: string, check: () => Promise<boolean>, ms = 15_000) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return
    await Bun.sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

export async function redisCli(...args: string[]) {
  const child = Bun.spawn(['redis-cli', ...args], { stdout: 'pipe', stderr: 'pipe' })
  return (await new Response(child.stdout).text()).trim()
}

export interface RedisCluster {
  /** `redis+cluster://` naming every master, the first one first. */
  url: string
  nodes: RedisServer[]
  stop(): void
}

/** `masters` masters, no replicas, every slot served (cluster_state:ok) before it returns. */
export async function startRedisCluster(masters = 3): Promise<RedisCluster> {
  const nodes = Array.from({ length: masters }, () =>
    redisServer(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--appendonly', 'no']),
  )
  const stop = () => {
    for (const n of nodes) n.stop()
  }
  try {
    for (const n of nodes)
      await until(`node ${n.port}`, async () => (await redisCli('-p', String(n.port), 'ping')) === 'PONG')
    await redisCli(
      '--cluster',
      'create',
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    )
    // Every node, not just one, must see every slot served before a client is pointed at it.
    for (const n of nodes)
      await until('cluster_state:ok', async () =>
        (await redisCli('-p', String(n.port), 'cluster', 'info')).includes('cluster_state:ok'),
      )
  } catch (error) {
    stop()
    throw error
  }
  return { url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`, nodes, stop }
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
