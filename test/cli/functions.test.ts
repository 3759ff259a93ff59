// `svc-gateway functions ...` run as a process from source, against a redis-server of this file's
// own (a prune deletes every old svc_ library in it): what it prints, what it deletes, and a clear
// line and exit 1, no stack trace, when Redis is unreachable or has no functions.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type AddressInfo, createServer } from 'node:net'
import Redis from 'ioredis'
import { type LocalRedis, startLocalRedis } from '../../src/redis/local-server.ts'
import { CLUSTER_LIBRARY, LIBRARY } from '../../src/redis/script-registry.ts'
import { runCli } from '../helpers/cli.ts'
import { libraryNames, tinyLibrary } from '../helpers/function-libraries.ts'
import { startRedisCluster } from '../helpers/redis-cluster.ts'

const OLD = 'svc_0123456789abcdef'

let server: LocalRedis
let redis: Redis

beforeAll(async () => {
  server = await startLocalRedis()
  redis = new Redis(server.url)
})
afterAll(async () => {
  redis.disconnect()
  await server.stop()
})

function cli(redisUrl: string, ...args: string[]) {
  return runCli(['functions', ...args], { REDIS_URL: redisUrl })
}

describe('svc-gateway functions', () => {
  test('list, prune --dry-run, prune: old versions deleted, this build and other names kept', async () => {
    await redis.call('FUNCTION', 'FLUSH')
    // This build's both libraries: a single server's and a Cluster's (a server once a Cluster's
    // node keeps it), each kept by a prune.
    for (const code of [LIBRARY.code, CLUSTER_LIBRARY.code, tinyLibrary(OLD), tinyLibrary('otherapp')])
      await redis.call('FUNCTION', 'LOAD', code)
    const all = await libraryNames(redis)

    for (const args of [[], ['list']]) {
      const listed = await cli(server.url, ...args)
      expect({ args, code: listed.code, stderr: listed.stderr }).toEqual({ args, code: 0, stderr: '' })
      expect(listed.stdout.trim().split('\n').sort()).toEqual(
        [
          `${LIBRARY.name}  ${Buffer.byteLength(LIBRARY.code)} bytes  (this build)`,
          `${CLUSTER_LIBRARY.name}  ${Buffer.byteLength(CLUSTER_LIBRARY.code)} bytes  (this build)`,
          `${OLD}  ${Buffer.byteLength(tinyLibrary(OLD))} bytes`,
        ].sort(),
      )
    }

    const dry = await cli(server.url, 'prune', '--dry-run')
    expect(dry.code).toBe(0)
    expect(dry.stdout).toContain(`would delete ${OLD}  ${Buffer.byteLength(tinyLibrary(OLD))} bytes\n`)
    expect(dry.stdout).toContain(
      `kept ${LIBRARY.name}  ${Buffer.byteLength(LIBRARY.code)} bytes  (this build)\n`,
    )
    expect(dry.stdout).toContain('functions: would delete 1 old library')
    expect(await libraryNames(redis)).toEqual(all)

    const pruned = await cli(server.url, 'prune')
    expect(pruned.code).toBe(0)
    expect(pruned.stdout).toContain(`deleted ${OLD}  `)
    expect(pruned.stdout).toContain(`kept ${LIBRARY.name}  `)
    expect(pruned.stdout).toContain(`kept ${CLUSTER_LIBRARY.name}  `)
    expect(pruned.stdout).not.toContain('otherapp')
    expect(await libraryNames(redis)).toEqual([LIBRARY.name, CLUSTER_LIBRARY.name, 'otherapp'].sort())
  })

  test("list says when this build's library is not loaded yet", async () => {
    await redis.call('FUNCTION', 'FLUSH')
    const listed = await cli(server.url)
    expect(listed.code).toBe(0)
    expect(listed.stdout).toBe(
      `${LIBRARY.name}  not loaded  (this build; a gateway loads it on its first script call)\n`,
    )
  })

  test('Redis unreachable: one clear line, exit 1', async () => {
    const result = await cli('redis://127.0.0.1:9', 'prune')
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toMatch(/^svc-gateway: functions: cannot reach Redis \(.*ECONNREFUSED.*\)\n$/)
  })

  test('a server that drops every connection: given up after a few tries, not reconnected to for ever', async () => {
    let connections = 0
    const dropping = createServer((socket) => {
      connections++
      socket.destroy()
    })
    await new Promise<void>((resolve) => dropping.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = dropping.address() as AddressInfo
      const result = await cli(`redis://127.0.0.1:${port}`, 'prune')
      expect(result.code).toBe(1)
      expect(result.stderr).toMatch(/^svc-gateway: functions: cannot reach Redis \(.+\)\n$/)
      // ioredis's few retries, where Bun's own client would reconnect without end.
      expect(connections).toBeGreaterThan(0)
      expect(connections).toBeLessThanOrEqual(10)
    } finally {
      dropping.close()
    }
  })

  test('a Redis without functions (before 7.0): one clear line, exit 1', async () => {
    const old = await startLocalRedis(['--rename-command', 'FUNCTION', 'FUNCTION_OFF'])
    try {
      const result = await cli(old.url, 'prune')
      expect(result.code).toBe(1)
      expect(result.stderr).toBe(
        'svc-gateway: functions: this Redis has no FUNCTION command (functions came with Redis 7.0)\n',
      )
    } finally {
      await old.stop()
    }
  })

  test("a Cluster: every master listed and pruned; the build's library there is the guarded one", async () => {
    const cluster = await startRedisCluster()
    const nodes = cluster.nodes.map((node) => new Redis(node.port, '127.0.0.1'))
    try {
      const listedBare = await cli(cluster.url)
      expect(listedBare.stdout).toBe(
        `${CLUSTER_LIBRARY.name}  not loaded  (this build; a gateway loads it on its first script call)\n`,
      )
      for (const node of nodes) {
        for (const code of [CLUSTER_LIBRARY.code, tinyLibrary(OLD)]) await node.call('FUNCTION', 'LOAD', code)
      }
      const listed = await cli(cluster.url)
      expect(listed.stdout.trim().split('\n').sort()).toEqual(
        [
          `${CLUSTER_LIBRARY.name}  ${Buffer.byteLength(CLUSTER_LIBRARY.code)} bytes  (this build)`,
          `${OLD}  ${Buffer.byteLength(tinyLibrary(OLD))} bytes`,
        ].sort(),
      )
      const pruned = await cli(cluster.url, 'prune')
      expect(pruned.code).toBe(0)
      expect(pruned.stdout).toContain(`deleted ${OLD}  `)
      for (const node of nodes) expect(await libraryNames(node)).toEqual([CLUSTER_LIBRARY.name])
    } finally {
      for (const node of nodes) node.disconnect()
      await cluster.stop()
    }
  }, 60_000)

  test('usage errors exit 2', async () => {
    for (const args of [['frobnicate'], ['list', '--dry-run'], ['prune', 'now'], ['prune', '--force']]) {
      const result = await cli(server.url, ...args)
      expect({ args, code: result.code }).toEqual({ args, code: 2 })
      expect(result.stderr).toContain('usage:')
    }
  })
})
