// One replica reaps for all: the reaping claim in Redis is taken by one replica, held on by its
// passes, refused to the others while it holds, and taken over by another once its holder stops.
import { afterAll, expect, test } from 'bun:test'
import { claimReaping } from '../../src/market/reaper.ts'
import { marketFixture } from '../helpers/market.ts'
import { until } from '../helpers/wait.ts'

const fx = marketFixture()
afterAll(() => fx.close())

test('one replica holds the reaping claim at a time; another takes it once its holder stops', async () => {
  const ttlMs = 300
  expect(await claimReaping(fx.store, fx.keys, ttlMs, 'replica-a')).toBe(true)
  expect(await claimReaping(fx.store, fx.keys, ttlMs, 'replica-b')).toBe(false)
  // The holder's next pass holds it on.
  expect(await claimReaping(fx.store, fx.keys, ttlMs, 'replica-a')).toBe(true)
  expect(await claimReaping(fx.store, fx.keys, ttlMs, 'replica-b')).toBe(false)
  // replica-a stops reaping: its claim lapses and replica-b's next pass takes it.
  await until(async () => (await fx.store.exists(fx.keys.reaperClaim)) === 0)
  expect(await claimReaping(fx.store, fx.keys, ttlMs, 'replica-b')).toBe(true)
  expect(await claimReaping(fx.store, fx.keys, ttlMs, 'replica-a')).toBe(false)
  expect(await fx.store.get(fx.keys.reaperClaim)).toBe('replica-b')
})
