// A supplier's earnings per UTC day, held apart (one fills Stream per offer), read while Redis's
// clock passes midnight: every Stream is scanned over the same window of days, so no fill of a day
// shown goes missing from it.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { supplierEarnings } from '../../src/suppliers/earnings.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'

let store: Store
let keys: Keyspace

beforeAll(async () => {
  store = createStore(testRedisUrl(), { name: 'rv-earnings-midnight' })
  keys = keyspace(testPrefix(), 'apart')
})
afterAll(() => store.close())

/** The store, its TIME answering each call with the next of `clock` (ms): midnight passes between reads. */
function clockedStore(real: Store, clock: number[]): Store {
  return new Proxy(real, {
    get(target, name) {
      if (name === 'time') {
        return async () => {
          const ms = clock.length > 1 ? clock.shift()! : clock[0]!
          return [String(Math.floor(ms / 1000)), String((ms % 1000) * 1000)]
        }
      }
      const value = Reflect.get(target, name, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

test('held apart: a read across UTC midnight counts each offer’s fills over one window of days', async () => {
  const supplierId = `spl_${randomBytes(12).toString('hex')}`
  const offers = ['o-first', 'o-second']
  await store.sadd(keys.supplierOffers(supplierId), ...offers)
  // The window (7 days) ends today; the second offer's fill is at noon of its first day.
  const midnight = Date.parse('2030-01-08T00:00:00Z')
  const firstDayNoon = Date.parse('2030-01-01T12:00:00Z')
  for (const offer of offers) {
    await store.xadd(
      keys.offerFills(offer, supplierId),
      `${firstDayNoon}-0`,
      'offer',
      offer,
      'earnedUsdc',
      '1000',
      'burnDiem',
      '2500',
    )
  }
  // One millisecond before midnight for the first Stream's read, midnight for any later read.
  const earnings = await supplierEarnings(
    clockedStore(store, [midnight - 1, midnight]),
    keys,
    supplierId,
    '7d',
  )
  expect(earnings.from).toBe('2030-01-01')
  expect(earnings.to).toBe('2030-01-07')
  const first = earnings.days.find((d) => d.date === '2030-01-01')!
  // Both offers' fills of the window's first day: 2 fills, 0.002000 earned.
  expect(first).toEqual({ date: '2030-01-01', earnedUsdc: '0.002000', burnDiem: '0.005000', fills: 2 })
  expect(earnings.earnedUsdc).toBe('0.002000')
  expect(earnings.fills).toBe(2)
})
