// Listing and pruning the gateway's function libraries (src/redis/function-libraries.ts) on a
// redis-server of this file's own, since a prune deletes every old svc_ library in it: this build's
// two libraries (a single server's, a Cluster's) and libraries of other names survive, old
// versions' go, a dry run deletes nothing, and a replica still calling a pruned library loads it
// again and gets its answer.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { listGatewayLibraries, pruneGatewayLibraries } from '../../src/redis/function-libraries.ts'
import { functionLibrary } from '../../src/redis/functions.ts'
import { type LocalRedis, startLocalRedis } from '../../src/redis/local-server.ts'
import { ScriptLane } from '../../src/redis/script-lane.ts'
import { BUILD_LIBRARIES, CLUSTER_LIBRARY, LIBRARY } from '../../src/redis/script-registry.ts'
import { libraryNames, tinyLibrary } from '../helpers/function-libraries.ts'
import { until } from '../helpers/wait.ts'

const OLD = ['svc_0123456789abcdef', 'svc_fedcba9876543210']
/** Not a name functionLibrary makes: never listed, never deleted. */
const OTHERS = ['otherapp', 'svc_ABCDEF0123456789', 'svc_legacy', 'svc_0123456789abcdef0']

let server: LocalRedis
let redis: Redis

beforeAll(async () => {
  server = await startLocalRedis()
  redis = new Redis(server.url)
})
afterEach(() => redis.call('FUNCTION', 'FLUSH'))
afterAll(async () => {
  redis.disconnect()
  await server.stop()
})

const BUILD = [LIBRARY, CLUSTER_LIBRARY]
const BUILD_NAMES = BUILD.map((library) => library.name).sort()

async function loadAll(): Promise<void> {
  for (const { code } of BUILD) await redis.call('FUNCTION', 'LOAD', code)
  for (const name of [...OLD, ...OTHERS]) await redis.call('FUNCTION', 'LOAD', tinyLibrary(name))
}

describe('the gateway libraries in Redis', () => {
  test("list: only svc_<16 hex> names, this build's two marked, each with the bytes of its code", async () => {
    await loadAll()
    expect(BUILD_NAMES).toEqual([...BUILD_LIBRARIES].sort())
    expect(LIBRARY.name).not.toBe(CLUSTER_LIBRARY.name)
    expect(await listGatewayLibraries(redis, BUILD_LIBRARIES)).toEqual(
      [
        ...BUILD.map(({ name, code }) => ({ name, current: true, codeBytes: Buffer.byteLength(code) })),
        ...OLD.map((name) => ({ name, current: false, codeBytes: Buffer.byteLength(tinyLibrary(name)) })),
      ].sort((a, b) => a.name.localeCompare(b.name)),
    )
    expect(LIBRARY.code.length).toBeGreaterThan(10_000)
  })

  test('a dry run deletes nothing and names what a prune would delete', async () => {
    await loadAll()
    const before = await libraryNames(redis)
    const result = await pruneGatewayLibraries(redis, BUILD_LIBRARIES, { dryRun: true })
    expect(result.stale.map((library) => library.name)).toEqual(OLD)
    expect(result.kept.map((library) => library.name)).toEqual(BUILD_NAMES)
    expect(await libraryNames(redis)).toEqual(before)
  })

  test("prune deletes the old versions' libraries and keeps this build's two and every other name", async () => {
    await loadAll()
    const result = await pruneGatewayLibraries(redis, BUILD_LIBRARIES, { dryRun: false })
    expect(result.stale.map((library) => library.name)).toEqual(OLD)
    expect(result.kept.map((library) => library.name)).toEqual(BUILD_NAMES)
    expect(await libraryNames(redis)).toEqual([...BUILD_NAMES, ...OTHERS].sort())
    expect(await redis.call('FCALL', 'otherapp_ping', 0)).toBe('otherapp')
    // Nothing left to prune.
    expect(await pruneGatewayLibraries(redis, BUILD_LIBRARIES, { dryRun: false })).toEqual({
      stale: [],
      kept: BUILD_NAMES.map((name) => expect.objectContaining({ name })),
    })
  })

  test("this build's library not loaded yet: the old ones go all the same, nothing is kept", async () => {
    for (const name of [...OLD, 'otherapp']) await redis.call('FUNCTION', 'LOAD', tinyLibrary(name))
    const result = await pruneGatewayLibraries(redis, BUILD_LIBRARIES, { dryRun: false })
    expect(result.stale.map((library) => library.name)).toEqual(OLD)
    expect(result.kept).toEqual([])
    expect(await libraryNames(redis)).toEqual(['otherapp'])
  })

  test('a replica calling a library just pruned loads it again and gets its answer', async () => {
    // Another version's library, as functionLibrary makes it: a prune deletes it.
    const old = functionLibrary({ echo: { body: 'return ARGV[1]', market: false } }, { guarded: false })
    expect(old.name).not.toBe(LIBRARY.name)
    const lane = new ScriptLane(server.url, 'svc-test-old-replica')
    try {
      await until(() => lane.ready)
      expect(await lane.call(old, 'echo', 'return ARGV[1]', [], ['before'])).toBe('before')
      await redis.call('FUNCTION', 'LOAD', LIBRARY.code)

      const { stale } = await pruneGatewayLibraries(redis, BUILD_LIBRARIES, { dryRun: false })
      expect(stale.map((library) => library.name)).toEqual([old.name])
      expect(await libraryNames(redis)).toEqual([LIBRARY.name])

      const loadsBefore = await functionLoads()
      expect(await lane.call(old, 'echo', 'return ARGV[1]', [], ['after'])).toBe('after')
      expect((await functionLoads()) - loadsBefore).toBe(1)
      expect(await libraryNames(redis)).toEqual([LIBRARY.name, old.name].sort())
    } finally {
      lane.close()
    }
  })

  test('a Redis without functions (before 7.0): a clear error', async () => {
    const old = await startLocalRedis(['--rename-command', 'FUNCTION', 'FUNCTION_OFF'])
    const client = new Redis(old.url)
    try {
      await expect(listGatewayLibraries(client, BUILD_LIBRARIES)).rejects.toThrow(
        'this Redis has no FUNCTION command (functions came with Redis 7.0)',
      )
      await expect(pruneGatewayLibraries(client, BUILD_LIBRARIES, { dryRun: false })).rejects.toThrow(
        'no FUNCTION command',
      )
    } finally {
      client.disconnect()
      await old.stop()
    }
  })
})

/** FUNCTION LOADs this server has run (INFO commandstats). */
async function functionLoads(): Promise<number> {
  const info = await redis.info('commandstats')
  return Number(/cmdstat_function\|load:calls=(\d+)/.exec(info)?.[1] ?? 0)
}
