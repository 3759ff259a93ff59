// GET /v1/supplier/earnings answers from sums kept beside each fills Stream (the supplier's, or
// held apart, one per offer on the offer's slot), as usage does (usage-sums.test.ts): exactly a
// scan of every Stream, and a read costs what was appended since the last one.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { lastDays, utcDay } from '../../src/records/days.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../../src/records/refusals.ts'
import { STATS_WINDOWS } from '../../src/records/stats.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { supplierEarnings } from '../../src/suppliers/earnings.ts'
import { fillStreams, listFills } from '../../src/suppliers/fills.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import {
  append,
  DAY,
  HOUR,
  idsAt,
  newProbe,
  probedStore,
  referenceEarnings,
  seeded,
} from '../helpers/usage-streams.ts'

let store: Store
beforeAll(() => {
  store = createStore(testRedisUrl(), { name: 'rv-earnings-sums' })
})
afterAll(() => store.close())

const NOW = Date.parse('2031-07-02T03:41:09.007Z')

/** `count` fills spread over [from, to) on the supplier's Streams, one per offer held apart. */
async function fills(
  keys: Keyspace,
  supplierId: string,
  offers: string[],
  count: number,
  from: number,
  to: number,
  seed: number,
  /** A fill's clear's time where it was posted later (held apart), else undefined. */
  clearedAt: (ms: number, random: () => number) => number | undefined = () => undefined,
) {
  const random = seeded(seed)
  const times = Array.from({ length: count }, () => from + Math.floor(random() * (to - from))).sort(
    (a, b) => a - b,
  )
  const byStream = new Map<string, number[]>()
  for (const ms of times) {
    const offer = offers[Math.floor(random() * offers.length)]!
    const stream = keys.offerFills(offer, supplierId)
    byStream.set(stream, [...(byStream.get(stream) ?? []), ms])
  }
  for (const [stream, at] of byStream) {
    await append(store, stream, idsAt(at), (i) => [
      ...((cleared) => (cleared === undefined ? [] : ['clearedAt', String(cleared)]))(
        clearedAt(at[i]!, random),
      ),
      'offer',
      'o',
      'model',
      'llama-3.3-70b',
      'burnDiem',
      String(Math.floor(random() * 90_000)),
      'askCents',
      '40',
      'earnedUsdc',
      String(Math.floor(random() * 40_000)),
    ])
  }
}

for (const layout of ['one-slot', 'apart'] as const) {
  describe(`${layout}`, () => {
    const keys = keyspace(testPrefix(), layout)
    const supplierId = `spl_${randomBytes(8).toString('hex')}`
    const offers = layout === 'apart' ? ['o-1', 'o-2', 'o-3'] : ['o-1']

    test('every window and retention: the sums answer exactly what a scan of every fills Stream does', async () => {
      await store.sadd(keys.supplierOffers(supplierId), ...offers)
      await fills(keys, supplierId, offers, 3_000, NOW - 33 * DAY, NOW, 3)
      const streams = await fillStreams(store, keys, supplierId)
      for (const retention of [DEFAULT_RECORD_RETENTION_MS, 2 * DAY + 29 * 60_000, 5 * HOUR + 1]) {
        for (const window of ['24h', '7d', '30d'] as const) {
          const earnings = await supplierEarnings(
            probedStore(store, NOW, newProbe()),
            keys,
            supplierId,
            window,
            retention,
          )
          expect(earnings).toEqual(await referenceEarnings(store, streams, window, NOW, retention))
        }
      }
    })

    test('fills posted after their clear count at its time: across hours, midnights and the retention’s bound', async () => {
      const late = `spl_${randomBytes(8).toString('hex')}`
      await store.sadd(keys.supplierOffers(late), ...offers)
      // A third posted late: up to three hours after the clear, some just past a midnight or an hour.
      await fills(keys, late, offers, 2_000, NOW - 12 * DAY, NOW, 7, (ms, random) => {
        const pick = random()
        if (pick < 0.1) return Math.floor(ms / DAY) * DAY - 100
        if (pick < 0.2) return Math.floor(ms / HOUR) * HOUR - 1
        return pick < 0.33 ? ms - Math.floor(random() * 3 * HOUR) : undefined
      })
      const streams = await fillStreams(store, keys, late)
      // Some fills' clears fall on another day than their posts: the check is not vacuous.
      let moved = 0
      for (const stream of streams)
        for (const [id, flat] of (await store.xrange(stream, '-', '+')) as [string, string[]][]) {
          const at = flat.indexOf('clearedAt')
          if (at >= 0 && utcDay(Number(flat[at + 1])) !== utcDay(Number(id.split('-')[0]))) moved++
        }
      expect(moved).toBeGreaterThan(100)
      // Bounds mid-hour on either half (the edge hour read from the Stream both ways), a day, 30.
      const retentions = [
        DEFAULT_RECORD_RETENTION_MS,
        2 * DAY + 10 * 60_000,
        3 * DAY + 50 * 60_000,
        5 * HOUR + 1,
      ]
      for (const retention of retentions) {
        for (const window of ['24h', '7d', '30d'] as const) {
          const earnings = await supplierEarnings(
            probedStore(store, NOW, newProbe()),
            keys,
            late,
            window,
            retention,
          )
          expect(earnings).toEqual(await referenceEarnings(store, streams, window, NOW, retention))
        }
      }
    })

    test('fills and clears on the edges: an hour, a midnight, the retention’s bound, each ±1 ms; the listing agrees', async () => {
      // Redis's clock at an exact midnight, and at an exact hour: windows whose bounds fall on edges.
      for (const now of [Date.parse('2031-07-03T00:00:00.000Z'), Date.parse('2031-07-02T05:00:00.000Z')]) {
        const edgy = `spl_${randomBytes(8).toString('hex')}`
        await store.sadd(keys.supplierOffers(edgy), ...offers)
        const retentions = [2 * DAY, 5 * HOUR, 5 * HOUR + 1, 5 * HOUR - 1, 26 * HOUR + 30 * 60_000]
        // Every edge an id or a clear can sit on: hours, midnights, and each retention's bound.
        const edges = new Set<number>()
        for (let h = 0; h <= 8 * 24; h++) edges.add(Math.floor(now / HOUR) * HOUR - h * HOUR)
        for (const r of retentions) edges.add(now - r)
        const posts: [number, number | undefined][] = []
        const random = seeded(11)
        for (const edge of [...edges].filter((ms) => ms <= now))
          for (const d of [-1, 0, 1]) {
            const ms = edge + d
            if (ms > now) continue
            // Posted at the edge, its clear just before, at the edge, an hour or a day before, or 40 days before.
            const pick = [
              undefined,
              ms - 1,
              ms,
              ms - HOUR,
              ms - DAY,
              ms - 40 * DAY,
              Math.floor(ms / HOUR) * HOUR,
            ]
            posts.push([ms, pick[Math.floor(random() * pick.length)]])
            // And a post of a clear at the edge, made later.
            posts.push([Math.min(now, ms + 1 + Math.floor(random() * 3 * HOUR)), ms])
          }
        posts.sort((a, b) => a[0] - b[0])
        const streams = offers.map((offer) => keys.offerFills(offer, edgy))
        const byStream = new Map<string, [number, number | undefined][]>()
        for (const [i, p] of posts.entries()) {
          const stream = streams[i % streams.length]!
          byStream.set(stream, [...(byStream.get(stream) ?? []), p])
        }
        for (const [stream, at] of byStream)
          await append(store, stream, idsAt(at.map(([ms]) => ms)), (i) => [
            ...(at[i]![1] === undefined ? [] : ['clearedAt', String(at[i]![1])]),
            'offer',
            'o',
            'model',
            'm',
            'burnDiem',
            String(1 + i),
            'askCents',
            '40',
            'earnedUsdc',
            String(1_000 + i),
          ])
        const listed = await fillStreams(store, keys, edgy)
        for (const retention of retentions) {
          // The listing, every page, by the day each fill says it was made.
          const fromListing = new Map<string, { fills: number; earned: number }>()
          let before: string | null = null
          do {
            const page: Awaited<ReturnType<typeof listFills>> = await listFills(
              probedStore(store, now, newProbe()),
              keys,
              edgy,
              97,
              before,
              retention,
            )
            for (const item of page.data) {
              const day = item.createdAt.slice(0, 10)
              const row = fromListing.get(day) ?? { fills: 0, earned: 0 }
              row.fills += 1
              row.earned += Math.round(Number(item.earnedUsdc) * 1e6)
              fromListing.set(day, row)
            }
            before = page.nextCursor
          } while (before !== null)
          // Not vacuous: fills listed on several days, some of them before their posts' day.
          expect(fromListing.size).toBeGreaterThan(1)
          for (const window of ['24h', '7d', '30d'] as const) {
            const earnings = await supplierEarnings(
              probedStore(store, now, newProbe()),
              keys,
              edgy,
              window,
              retention,
            )
            expect(earnings).toEqual(await referenceEarnings(store, listed, window, now, retention))
            // The days of the window as the listing shows them, where the window starts within the retention.
            const days = lastDays(now, STATS_WINDOWS[window])
            if (Date.parse(`${days[0]}T00:00:00Z`) >= now - retention)
              for (const day of earnings.days) {
                const row = fromListing.get(day.date) ?? { fills: 0, earned: 0 }
                expect({
                  date: day.date,
                  fills: day.fills,
                  earned: Math.round(Number(day.earnedUsdc) * 1e6),
                }).toEqual({
                  date: day.date,
                  ...row,
                })
              }
          }
        }
      }
    })

    test('a read after N fills reads those N', async () => {
      await fills(keys, supplierId, offers, 41, NOW - 20 * 60_000, NOW, 5)
      const streams = await fillStreams(store, keys, supplierId)
      const probe = newProbe()
      const earnings = await supplierEarnings(probedStore(store, NOW, probe), keys, supplierId, '30d')
      expect(earnings).toEqual(
        await referenceEarnings(store, streams, '30d', NOW, DEFAULT_RECORD_RETENTION_MS),
      )
      expect(probe.ranged).toBe(41)
      // Each Stream's sums beside it, in its slot.
      for (const stream of streams) expect(await store.exists(keys.fillsSums(stream))).toBe(1)
    })
  })
}
