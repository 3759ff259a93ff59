// A key moved to a name on another slot (a Cluster's RENAME cannot reach): whole, with its time to
// live; a move stopped after its copy, run again, keeps the copy and drops the original.
import { afterAll, expect, test } from 'bun:test'
import { moveKey } from '../../src/redis/move-key.ts'
import { createStore } from '../../src/redis/store.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'

const store = createStore(testRedisUrl())
afterAll(() => store.close())

test('moved whole with its time to live; nothing there is no move; a copy left on both sides is kept', async () => {
  const from = `${testPrefix()}:hash`
  const to = `${testPrefix()}:hash`
  await store.hset(from, { a: '1', b: '2' })
  await store.pexpire(from, 600_000)
  expect(await moveKey(store, from, to)).toBe(true)
  expect(await store.exists(from)).toBe(0)
  expect(await store.hgetall(to)).toEqual({ a: '1', b: '2' })
  expect(await store.pttl(to)).toBeGreaterThan(500_000)
  expect(await moveKey(store, from, to)).toBe(false)

  const stream = `${testPrefix()}:stream`
  const copy = `${testPrefix()}:stream`
  await store.xadd(stream, '5-1', 'e', 'x')
  await store.restore(copy, 0, (await store.dumpBuffer(stream))!)
  expect(await moveKey(store, stream, copy)).toBe(true)
  expect(await store.exists(stream)).toBe(0)
  expect(await store.xrange(copy, '-', '+')).toEqual([['5-1', ['e', 'x']]])
  expect(await store.pttl(copy)).toBe(-1)
})
