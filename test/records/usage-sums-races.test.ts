// The sums beside an activity Stream (src/records/stream-sums.ts) against what else happens to
// them between a read's steps: another read resetting them (the Stream lost an entry), or the
// hash deleted by hand. A read must answer what a scan of the Stream answers, and never write a
// sum of entries the Stream no longer holds.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { DEFAULT_RECORD_RETENTION_MS } from '../../src/records/refusals.ts'
import { accountUsage } from '../../src/records/usage.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { SCRIPTS } from '../../src/redis/script-registry.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import {
  append,
  endedEntry,
  HOUR,
  idsAt,
  newProbe,
  probedStore,
  referenceUsage,
  seeded,
} from '../helpers/usage-streams.ts'

let store: Store
let keys: Keyspace
beforeAll(() => {
  store = createStore(testRedisUrl(), { name: 'rv2-sums-races' })
  keys = keyspace(testPrefix(), 'apart')
})
afterAll(() => store.close())

/** Where foldSums's ARGV says a reset. */
const RESET = (SCRIPTS.foldSums.argv as readonly string[]).indexOf('reset')
const NOW = Date.parse('2031-03-10T10:17:23.456Z')

/** A new account whose Stream holds `count` completed attempts, one a minute before NOW - 1h. */
async function account(count: number) {
  const accountId = `acc_${randomBytes(8).toString('hex')}`
  const stream = keys.accountActivity(accountId)
  const times = Array.from({ length: count }, (_, i) => NOW - HOUR - (count - i) * 60_000)
  const ids = idsAt(times)
  const random = seeded(5)
  await append(store, stream, ids, () => {
    const fields = endedEntry(random, accountId).split('\x1f')
    fields[3] = 'completed'
    return ['e', fields.join('\x1f')]
  })
  return { accountId, stream, ids }
}

/** `real` with `hook` awaited once, before the call named `name` whose first argument is `key`. */
function hooked(real: Store, name: string, key: string, hook: () => Promise<void>): Store {
  const fixed = probedStore(real, NOW, newProbe())
  let armed = true
  return new Proxy(fixed, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target)
      if (prop !== name || typeof value !== 'function') return value
      return async (...args: unknown[]) => {
        if (armed && args[0] === key) {
          armed = false
          await hook()
        }
        return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args)
      }
    },
  })
}

/** The reads' store whose first fold of `key`'s sums is reported by `done`, then held until `go`. */
function pausedAfterReset(real: Store, done: () => void, go: Promise<void>): Store {
  const fixed = probedStore(real, NOW, newProbe())
  return new Proxy(fixed, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target)
      if (prop !== 'sendScript') return value
      return async (...args: Parameters<Store['sendScript']>) => {
        const result = await target.sendScript(...args)
        if (args[0] === 'foldSums' && args[2][RESET] === '1') {
          done()
          await go
        }
        return result
      }
    },
  })
}

const expected = (stream: string) => referenceUsage(store, stream, '30d', NOW, DEFAULT_RECORD_RETENTION_MS)

test('a fold read before an entry was deleted is not written after another read reset the sums', async () => {
  const { accountId, stream, ids } = await account(50)
  const sums = keys.accountUsage(accountId)
  const go = Promise.withResolvers<void>()
  let other: Promise<unknown> = Promise.resolve()
  // The first read (no sums yet) has read the entries; before it folds them one is deleted, and a
  // second read sees the hole and resets the sums (cursor still none), then waits.
  const first = hooked(store, 'sendScript', 'foldSums', async () => {
    await store.call('XDEL', stream, ids[45]!)
    const reset = Promise.withResolvers<void>()
    other = accountUsage(pausedAfterReset(store, reset.resolve, go.promise), keys, accountId, '30d')
    await reset.promise
  })
  const answer = accountUsage(first, keys, accountId, '30d')
  // Released once the first read wrote (or was refused) its fold.
  const released = (async () => {
    for (;;) {
      if ((await store.hget(sums, 'cursor')) !== null) break
      await Bun.sleep(1)
      if (Bun.peek.status(answer) !== 'pending') break
    }
    go.resolve()
  })()
  await Promise.all([answer, released, other])
  // Whatever the two answered, what the sums keep now must be the Stream's.
  const again = await accountUsage(probedStore(store, NOW, newProbe()), keys, accountId, '30d')
  expect(again).toEqual(await expected(stream))
  expect(again.requests).toBe(49)
})

test('the sums deleted by hand between a read’s fold and its read of them: the answer is still the scan', async () => {
  const { accountId, stream } = await account(40)
  const sums = keys.accountUsage(accountId)
  await accountUsage(probedStore(store, NOW, newProbe()), keys, accountId, '30d')
  const racing = hooked(store, 'hgetall', sums, async () => {
    await store.del(sums)
  })
  const answer = await accountUsage(racing, keys, accountId, '30d')
  expect(answer).toEqual(await expected(stream))
  expect(answer.requests).toBe(40)
})

test('another read resetting the sums between a read’s fold and its read of them', async () => {
  const { accountId, stream, ids } = await account(30)
  const sums = keys.accountUsage(accountId)
  await accountUsage(probedStore(store, NOW, newProbe()), keys, accountId, '30d')
  const go = Promise.withResolvers<void>()
  let other: Promise<unknown> = Promise.resolve()
  const racing = hooked(store, 'hgetall', sums, async () => {
    await store.call('XDEL', stream, ids[25]!)
    const reset = Promise.withResolvers<void>()
    other = accountUsage(pausedAfterReset(store, reset.resolve, go.promise), keys, accountId, '30d')
    await reset.promise
  })
  const answering = accountUsage(racing, keys, accountId, '30d')
  // The other read is held after its reset until this one answered (the test's own time limit
  // guards a read that would wait on it).
  const answer = await answering
  go.resolve()
  await other
  expect(answer).toEqual(await expected(stream))
  expect(answer.requests).toBe(29)
})
