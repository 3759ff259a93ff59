// A store closed under a Redis that takes commands and never answers (paused, a port that drops
// packets), as a gateway's stop closes it: a script in flight fails at once as on a lost connection,
// on every lane the store owns, and a call tried again while Redis is away (a delivered stream's
// clear, which is kept once it fails) stops there rather than wait out the tries it has left.
import { afterAll, describe, expect, test } from 'bun:test'
import type { Cluster } from 'ioredis'
import { ClusterLane, PASSED } from '../../src/redis/cluster-lane.ts'
import { isRedisUnavailable, isStoreClosed } from '../../src/redis/connection.ts'
import { CLUSTER_LIBRARY } from '../../src/redis/script-registry.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { waitsFor, whileStoreAway } from '../../src/redis/store-retry.ts'
import { serverOf } from '../helpers/redis-cluster.ts'
import { type RedisProxy, startRedisProxy } from '../helpers/redis-proxy.ts'
import { onTestDatabase, testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const proxies: RedisProxy[] = []
afterAll(() => {
  for (const proxy of proxies) proxy.stop()
})

/** A proxy in front of the server that holds `prefix`'s keys (on a Cluster, its master). */
async function proxyFor(prefix: string): Promise<RedisProxy> {
  const target = new URL(await serverOf(testRedisUrl(), prefix))
  const proxy = startRedisProxy({ host: target.hostname, port: Number(target.port) })
  proxies.push(proxy)
  return proxy
}

/** How a call ended: its error, or null when it was answered. */
const failure = (call: Promise<unknown>) =>
  call.then(
    () => null,
    (error: unknown) => error,
  )

const touch = (store: Store, key: string) => runScript(store, 'touchKey', [key], {})

/** Longer than a stop waits for what it closed the store under (gateway.ts, CLOSED_SETTLE_MS). */
const TRIES_MS = 5_000
/** What failing at once allows a busy machine. */
const PROMPT_MS = 1_000

describe('a store closed under a Redis that never answers', () => {
  for (const form of ['functions', 'scripts'] as const) {
    test(`${form}: the script in flight fails at once as Redis being away, and tries again stop there`, async () => {
      const prefix = testPrefix()
      const key = `${prefix}:key:k`
      const proxy = await proxyFor(prefix)
      const store = createStore(onTestDatabase(proxy.url), {
        name: 'svc-test-closing',
        failFast: true,
        scriptForm: form,
      })
      try {
        await store.whenReady(15_000)
        if (form === 'functions') await until(() => store.lane !== undefined)
        // Answered while Redis answers (the library loaded where it was missing).
        expect(await failure(touch(store, key))).toBeNull()

        proxy.hold()
        const inFlight = failure(touch(store, key))
        const retried = failure(whileStoreAway(() => touch(store, key), waitsFor(TRIES_MS)))
        await proxy.held()
        const closedAt = Date.now()
        store.close()
        const [lost, gaveUp] = await Promise.all([inFlight, retried])
        expect(Date.now() - closedAt).toBeLessThan(PROMPT_MS)
        expect(isRedisUnavailable(lost)).toBe(true)
        expect(isRedisUnavailable(gaveUp)).toBe(true)
        // Sent after the close: Redis away for good, at once.
        const after = await failure(touch(store, key))
        expect(isRedisUnavailable(after)).toBe(true)
        expect(isStoreClosed(after)).toBe(true)
      } finally {
        store.close()
        proxy.stop()
      }
    }, 30_000)
  }

  test("the run's store (a Cluster's on a Cluster run), closed: a script fails at once, for good", async () => {
    const store = createStore(testRedisUrl(), { name: 'svc-test-closing', failFast: true })
    await store.whenReady(15_000)
    const key = `${testPrefix()}:key:k`
    expect(await failure(touch(store, key))).toBeNull()
    store.close()
    const after = await failure(touch(store, key))
    expect(isRedisUnavailable(after)).toBe(true)
    expect(isStoreClosed(after)).toBe(true)
  })

  test("a Cluster's native lane: the FCALL in flight fails at once as Redis being away", async () => {
    const prefix = testPrefix()
    const key = `${prefix}:key:k`
    const proxy = await proxyFor(prefix)
    // Every slot on the proxy's server: the lane reads nothing else of its Cluster client.
    const node = new URL(proxy.url).host
    const cluster = { status: 'ready', slots: Array.from({ length: 16_384 }, () => [node]) }
    const lane = new ClusterLane(cluster as unknown as Cluster, CLUSTER_LIBRARY, {
      name: 'svc-test-closing-scripts',
      tls: false,
    })
    try {
      // Passed on until its connection to the node is up; then sent there, whatever it answers.
      await until(async () => (await lane.call('touchKey', [key], []).catch(() => null)) !== PASSED)

      proxy.hold()
      const inFlight = failure(lane.call('touchKey', [key], []))
      await proxy.held()
      const closedAt = Date.now()
      lane.close()
      const lost = await inFlight
      expect(Date.now() - closedAt).toBeLessThan(PROMPT_MS)
      expect(isRedisUnavailable(lost)).toBe(true)
    } finally {
      lane.close()
      proxy.stop()
    }
  }, 30_000)
})
