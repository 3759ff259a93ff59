// The key listing that the "changes nothing" checks rest on (snapshotKeys, storedValues): on the
// run's Redis, one server or a Cluster, it finds every key of a prefix and none of another's, or
// those checks would compare two empty lists and pass.
import { afterAll, expect, test } from 'bun:test'
import { createStore } from '../src/redis/store.ts'
import { keysUnder, testPrefix, testRedisUrl } from './helpers/stack.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-keys' })
afterAll(() => store.close())

test("keysUnder lists a prefix's keys, those the glob after it matches, and no other prefix's", async () => {
  const [mine, other] = [testPrefix(), testPrefix()]
  const names = ['a', 'b:fills', 'c:d:fills', 'e?']
  for (const prefix of [mine, other]) for (const name of names) await store.set(`${prefix}:${name}`, '1')
  const of = (...some: string[]) => some.map((name) => `${mine}:${name}`)
  expect((await keysUnder(store, `${mine}:`)).sort()).toEqual(of(...names))
  expect((await keysUnder(store, `${mine}:`, '*:fills')).sort()).toEqual(of('b:fills', 'c:d:fills'))
  expect((await keysUnder(store, `${mine}:`, '?')).sort()).toEqual(of('a'))
  expect(await keysUnder(store, `${mine}:`, 'x*')).toEqual([])
})
