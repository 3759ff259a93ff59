// The catalog's in-process cache on a real Redis: an expired cache is served while one background
// read refreshes it, and callers at a cold start share one read.
import { afterAll, expect, test } from 'bun:test'
import type { CatalogEntry } from '../../src/catalog/entry.ts'
import { CatalogStore } from '../../src/catalog/store.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { createStore } from '../../src/redis/store.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-catalog' })
afterAll(() => store.close())

const entry = (id: string) => ({ row: { id }, prices: null }) as unknown as CatalogEntry

async function storeWith(...ids: string[]) {
  const keys = keyspace(testPrefix())
  for (const id of ids) await store.hset(keys.catalog, id, JSON.stringify(entry(id)))
  const clock = { now: 1_000_000 }
  return { keys, clock, catalog: new CatalogStore(store, keys, undefined, () => clock.now) }
}

test('an expired cache answers at once with what it has, and one background read refreshes it', async () => {
  const { keys, clock, catalog } = await storeWith('model-a')
  const first = await catalog.all()
  await store.hset(keys.catalog, 'model-b', JSON.stringify(entry('model-b')))
  clock.now += 999
  expect(await catalog.all()).toBe(first) // fresh: Redis not read
  clock.now += 1
  // Expired: the caller gets the cached map, not a wait on Redis.
  expect(await catalog.all()).toBe(first)
  await until(async () => (await catalog.all()) !== first)
  expect([...(await catalog.all()).keys()]).toEqual(['model-a', 'model-b'])
})

test('callers at a cold start share one read of Redis', async () => {
  const { catalog } = await storeWith('model-a', 'model-c')
  const maps = await Promise.all(Array.from({ length: 50 }, () => catalog.all()))
  for (const map of maps) expect(map).toBe(maps[0]!)
  expect([...maps[0]!.keys()]).toEqual(['model-a', 'model-c'])
})
