// The market's layout is recorded by the first gateway on a prefix and read back by every later one:
// a gateway told another layout refuses to start rather than write a second market beside the first.
import { afterAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { loadGatewayConfig } from '../../src/config.ts'
import { startGateway } from '../../src/gateway.ts'
import { createLogger } from '../../src/logger.ts'
import { keyspace, type Layout } from '../../src/redis/keys.ts'
import {
  claimLayout,
  LayoutMigratingError,
  LayoutMismatchError,
  migratingTo,
  recordedLayout,
} from '../../src/redis/layout.ts'
import { createStore } from '../../src/redis/store.ts'
import { onCluster, testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const store = createStore(testRedisUrl())
afterAll(() => store.close())
const freshPrefix = testPrefix

/** What Redis's MONITOR prints from now on, as text (every client's commands, in the order run). */
async function monitor(url: string) {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  let text = ''
  socket.on('data', (chunk) => {
    text += chunk.toString()
  })
  socket.write('MONITOR\r\n')
  await until(async () => text.startsWith('+OK'))
  return { text: () => text, end: () => socket.destroy() }
}

describe('the market layout', () => {
  test('the first claim records it; the same layout is claimed again, the other refused', async () => {
    const prefix = freshPrefix()
    expect(await recordedLayout(store, prefix)).toBeUndefined()
    await claimLayout(store, prefix, 'apart')
    await claimLayout(store, prefix, 'apart')
    expect(await recordedLayout(store, prefix)).toBe('apart')
    const refused = await claimLayout(store, prefix, 'one-slot').catch((error) => error)
    expect(refused).toBeInstanceOf(LayoutMismatchError)
    expect(refused.message).toContain("holds the market in the 'apart' layout")
    expect(await store.get(keyspace(prefix).layoutRecord)).toBe('apart')
  })

  test('a market written before layouts were recorded is on one slot', async () => {
    const prefix = freshPrefix()
    await store.sadd(keyspace(prefix).accounts, 'acct_1')
    expect(await recordedLayout(store, prefix)).toBe('one-slot')
    await expect(claimLayout(store, prefix, 'apart')).rejects.toBeInstanceOf(LayoutMismatchError)
    await claimLayout(store, prefix, 'one-slot')
    expect(await store.get(keyspace(prefix).layoutRecord)).toBe('one-slot')
  })

  test('concurrent first claims of both layouts: one wins, every other claim of it passes', async () => {
    const prefix = freshPrefix()
    const wanted: Layout[] = Array.from({ length: 8 }, (_, i) => (i % 2 ? 'apart' : 'one-slot'))
    const results = await Promise.allSettled(wanted.map((layout) => claimLayout(store, prefix, layout)))
    const recorded = await recordedLayout(store, prefix)
    expect(results.map((r) => r.status)).toEqual(
      wanted.map((w) => (w === recorded ? 'fulfilled' : 'rejected')),
    )
  })

  test('a gateway started with the other layout refuses to start, and writes nothing', async () => {
    const prefix = freshPrefix()
    await claimLayout(store, prefix, 'one-slot')
    const config = loadGatewayConfig({
      REDIS_URL: testRedisUrl(),
      SVC_REDIS_PREFIX: prefix,
      SVC_REDIS_LAYOUT: 'apart',
      SVC_ADMIN_TOKEN: 'a'.repeat(32),
      SVC_MASTER_KEY: 'ab'.repeat(32),
      SVC_UPSTREAM_URL: 'http://127.0.0.1:9',
      PORT: '0',
    })
    expect(config.redisLayout).toBe('apart')
    await expect(startGateway(config, createLogger('silent'))).rejects.toThrow(
      /SVC_REDIS_LAYOUT=apart would read none of it/,
    )
    expect(await store.get(keyspace(prefix).catalogMeta)).toBeNull()
  })

  // A migration records itself, then looks for replicas (src/cli/migrate-apart.ts): a gateway
  // must be seen before it reads the layout, or one reading just before the record could start on
  // a market being moved.
  test.skipIf(onCluster())(
    'a gateway is seen before it reads the layout; refused, it is seen no more',
    async () => {
      const prefix = freshPrefix()
      const keys = keyspace(prefix)
      const watch = await monitor(testRedisUrl())
      const seen = `"zadd" "${keys.replicas}"`
      const read = `"get" "${keys.layoutRecord}"`
      await store.set(keys.layoutRecord, migratingTo('apart'))
      const config = loadGatewayConfig({
        REDIS_URL: testRedisUrl(),
        SVC_REDIS_PREFIX: prefix,
        SVC_ADMIN_TOKEN: 'a'.repeat(32),
        SVC_MASTER_KEY: 'ab'.repeat(32),
        SVC_UPSTREAM_URL: 'http://127.0.0.1:9',
        PORT: '0',
      })
      try {
        await expect(startGateway(config, createLogger('silent'))).rejects.toBeInstanceOf(
          LayoutMigratingError,
        )
        await until(async () => watch.text().includes(read))
        expect(watch.text().indexOf(seen)).toBeGreaterThan(-1)
        expect(watch.text().indexOf(seen)).toBeLessThan(watch.text().indexOf(read))
        expect(await store.zcard(keys.replicas)).toBe(0)
      } finally {
        watch.end()
      }
    },
  )

  test('SVC_REDIS_LAYOUT accepts the two layouts and refuses anything else', () => {
    const env = {
      REDIS_URL: 'redis://127.0.0.1:6379',
      SVC_ADMIN_TOKEN: 'a'.repeat(32),
      SVC_MASTER_KEY: 'ab'.repeat(32),
      SVC_UPSTREAM_URL: 'http://127.0.0.1:9',
    }
    expect(loadGatewayConfig(env).redisLayout).toBe('one-slot')
    expect(() => loadGatewayConfig({ ...env, SVC_REDIS_LAYOUT: 'sharded' })).toThrow(/SVC_REDIS_LAYOUT/)
  })
})
