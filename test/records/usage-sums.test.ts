// GET /v1/agent/usage answers from sums kept beside the account's activity Stream, folded a read
// at a time (src/records/stream-sums.ts): its answer must be exactly what a scan of the whole
// Stream gives, while a read costs what was appended since the last one, not the window's every
// entry. Held apart, so that on a Cluster the accounts' keys (and their sums) are on many slots.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { DEFAULT_RECORD_RETENTION_MS } from '../../src/records/refusals.ts'
import { accountUsage } from '../../src/records/usage.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import {
  append,
  DAY,
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
  store = createStore(testRedisUrl(), { name: 'rv-usage-sums' })
  keys = keyspace(testPrefix(), 'apart')
})
afterAll(() => store.close())

// Redis's clock as the reads see it: mid-hour, so that a retention's bound is too.
const NOW = Date.parse('2031-03-10T10:17:23.456Z')
const WINDOWS = ['24h', '7d', '30d'] as const

/** A new account with `times` (ms) of entries on its Stream: its id and Stream. */
async function account(times: number[], seed = 1) {
  const accountId = `acc_${randomBytes(8).toString('hex')}`
  const stream = keys.accountActivity(accountId)
  const random = seeded(seed)
  await append(store, stream, idsAt(times), () => ['e', endedEntry(random, accountId)])
  return { accountId, stream }
}

/** `count` times spread over [from, to), ascending, with some sharing a ms. */
function spread(count: number, from: number, to: number, seed = 7): number[] {
  const random = seeded(seed)
  const times = Array.from({ length: count }, () => from + Math.floor(random() * (to - from)))
  return times.sort((a, b) => a - b)
}

async function expectScan(accountId: string, stream: string, retentionMs = DEFAULT_RECORD_RETENTION_MS) {
  for (const window of WINDOWS) {
    const probe = newProbe()
    const usage = await accountUsage(probedStore(store, NOW, probe), keys, accountId, window, retentionMs)
    expect(usage).toEqual(await referenceUsage(store, stream, window, NOW, retentionMs))
  }
}

test('every window and retention: the sums answer exactly what a scan of the whole Stream does', async () => {
  const dayStart = Math.floor(NOW / DAY) * DAY
  // Across 35 days (past the largest window), and on the edges of days and hours.
  const edges = [dayStart - 1, dayStart, dayStart - 6 * DAY, dayStart - 6 * DAY - 1, NOW - HOUR, NOW - 1]
  const times = [...spread(4_000, NOW - 35 * DAY, NOW), ...edges].sort((a, b) => a - b)
  const { accountId, stream } = await account(times)
  const retentions = [DEFAULT_RECORD_RETENTION_MS, 7 * DAY, 1.5 * DAY + 17 * 60_000, 2 * HOUR + 5_000, DAY]
  for (const retention of retentions) await expectScan(accountId, stream, retention)
  const usage = await accountUsage(probedStore(store, NOW, newProbe()), keys, accountId, '30d')
  expect(usage.requests).toBeGreaterThan(1_000)
})

test('the retention bound mid-hour: entries at and after it counted, none before, on either side of the hour', async () => {
  // An entry every 5 s for 6 hours around a day ago, and several in each ms at three bounds.
  const base = Math.floor((NOW - DAY) / HOUR) * HOUR
  const bounds = [base + 10 * 60_000 + 500, base + 50 * 60_000 + 1, base + HOUR]
  const every = Array.from({ length: (6 * HOUR) / 5_000 }, (_, i) => base - 3 * HOUR + i * 5_000)
  const around = bounds.flatMap((b) => [b - 1, b, b, b + 1])
  const { accountId, stream } = await account(
    [...every, ...around].sort((a, b) => a - b),
    3,
  )
  for (const bound of bounds) {
    await expectScan(accountId, stream, NOW - bound)
    // Folded: a read of the edge hour alone, from the bound or up to it, whichever is shorter.
    const probe = newProbe()
    await accountUsage(probedStore(store, NOW, probe), keys, accountId, '7d', NOW - bound)
    expect(probe.ranged).toBeLessThanOrEqual((30 * 60_000) / 5_000 + 4)
  }
})

test('a read after N entries were appended reads those N, not the window', async () => {
  const times = spread(5_000, NOW - 10 * DAY, NOW - HOUR, 11)
  const { accountId, stream } = await account(times, 5)
  const first = newProbe()
  await accountUsage(probedStore(store, NOW, first), keys, accountId, '7d')
  expect(first.ranged).toBe(5_000)

  const random = seeded(13)
  const later = spread(37, NOW - HOUR + 1, NOW, 17)
  await append(store, stream, idsAt(later), () => ['e', endedEntry(random, accountId)])
  for (const window of WINDOWS) {
    const probe = newProbe()
    const usage = await accountUsage(probedStore(store, NOW, probe), keys, accountId, window)
    expect(usage).toEqual(await referenceUsage(store, stream, window, NOW, DEFAULT_RECORD_RETENTION_MS))
    // The first read folds the 37; the next ones nothing.
    expect(probe.ranged).toBe(window === '24h' ? 37 : 0)
  }
})

test('reads that fold the same entries at once count each of them once', async () => {
  const { accountId, stream } = await account(spread(3_000, NOW - 20 * DAY, NOW, 19), 23)
  const readers = 6
  let arrived = 0
  const together = Promise.withResolvers<void>()
  // Every reader has read the same cursor and the same entries before any writes its fold.
  const barrier = async () => {
    if (++arrived === readers) together.resolve()
    await together.promise
  }
  const probes = Array.from({ length: readers }, newProbe)
  const answers = await Promise.all(
    probes.map((probe) => accountUsage(probedStore(store, NOW, probe, barrier), keys, accountId, '30d')),
  )
  const expected = await referenceUsage(store, stream, '30d', NOW, DEFAULT_RECORD_RETENTION_MS)
  for (const answer of answers) expect(answer).toEqual(expected)
  // One fold of the first page was written; the other five were refused, and read again.
  expect(probes.reduce((n, p) => n + p.refused, 0)).toBeGreaterThanOrEqual(readers - 1)
  // What the sums keep, read again with nothing new: still each entry once.
  await expectScan(accountId, stream)

  // And racing without a barrier, with entries appended meanwhile.
  const random = seeded(29)
  const more = idsAt(spread(500, NOW - 30 * 60_000, NOW, 31))
  const appending = append(store, stream, more, () => ['e', endedEntry(random, accountId)])
  await Promise.all(
    Array.from({ length: readers }, () =>
      accountUsage(probedStore(store, NOW, newProbe()), keys, accountId, '7d'),
    ),
  )
  await appending
  await expectScan(accountId, stream)
})

test('a Stream trimmed past the cursor is counted from what it still holds', async () => {
  const { accountId, stream } = await account(spread(3_000, NOW - 5 * DAY, NOW - 2 * HOUR, 37), 41)
  await expectScan(accountId, stream)
  // Entries appended and not yet folded, then the Stream trimmed into the middle of them.
  const random = seeded(43)
  const later = idsAt(spread(600, NOW - 2 * HOUR + 1, NOW, 47))
  await append(store, stream, later, () => ['e', endedEntry(random, accountId)])
  await store.xtrim(stream, 'MINID', later[250]!)
  await expectScan(accountId, stream)
  await expectScan(accountId, stream, 90 * 60_000)
  // Trimmed again, past everything folded, to mid-hour: the bound is the Stream's first entry.
  await store.xtrim(stream, 'MINID', later[400]!)
  await expectScan(accountId, stream)
})

test('an entry deleted from the middle, or the Stream deleted and made again: the sums are folded again', async () => {
  const times = spread(2_500, NOW - 8 * DAY, NOW, 53)
  const { accountId, stream } = await account(times, 59)
  await expectScan(accountId, stream)
  const ids = idsAt(times)
  await store.call('XDEL', stream, ids[1_200]!, ids[2_400]!)
  await expectScan(accountId, stream)
  // Made again with fewer entries, all older than the cursor.
  await store.del(stream)
  const random = seeded(61)
  await append(store, stream, idsAt(spread(300, NOW - 3 * DAY, NOW - 2 * DAY, 67)), () => [
    'e',
    endedEntry(random, accountId),
  ])
  await expectScan(accountId, stream)
  // Gone: nothing.
  await store.del(stream)
  const usage = await accountUsage(probedStore(store, NOW, newProbe()), keys, accountId, '30d')
  expect(usage.requests).toBe(0)
  await expectScan(accountId, stream)
})

test('the sums live in the account’s slot and drop hours past the largest window', async () => {
  const { accountId } = await account(spread(200, NOW - 40 * DAY, NOW, 71), 73)
  await accountUsage(probedStore(store, NOW, newProbe()), keys, accountId, '24h')
  const sums = keys.accountUsage(accountId)
  expect(sums).toStartWith(keys.accountBase(accountId))
  const oldest = Math.min(
    ...Object.keys(await store.hgetall(sums))
      .filter((f) => /^\d+:/.test(f))
      .map((f) => Number(f.split(':')[0]) * HOUR),
  )
  expect(oldest).toBeGreaterThanOrEqual(Math.floor(NOW / DAY) * DAY - 30 * DAY)
  expect(await store.pttl(sums)).toBeGreaterThan(30 * DAY)
})

test('a trim while the edge hour is read (a clear’s MINID at the bound): nothing before the bound is counted', async () => {
  // An entry every 10 s across the hour that holds the bound, the bound in its first half, so the
  // read takes the hour's sum less the entries before the bound.
  const bound = Math.floor((NOW - 3 * DAY) / HOUR) * HOUR + 20 * 60_000
  const times = Array.from({ length: (3 * HOUR) / 10_000 }, (_, i) => bound - 90 * 60_000 + i * 10_000)
  const { accountId, stream } = await account(times, 79)
  await accountUsage(probedStore(store, NOW, newProbe()), keys, accountId, '7d', NOW - bound)
  // A clear's trim lands between the read of the Stream's first entry and that of the edge hour.
  let trimmed = false
  const racing = new Proxy(probedStore(store, NOW, newProbe()), {
    get(target, name) {
      if (name === 'xrange')
        return async (...args: Parameters<Store['xrange']>) => {
          if (!trimmed) {
            trimmed = true
            await store.xtrim(stream, 'MINID', String(bound - 60_000))
          }
          return target.xrange(...args)
        }
      const value = Reflect.get(target, name, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  const usage = await accountUsage(racing, keys, accountId, '7d', NOW - bound)
  expect(trimmed).toBe(true)
  expect(usage).toEqual(await referenceUsage(store, stream, '7d', NOW, NOW - bound))
})
