// The records' Lua, tested directly against a real Redis: clear, release and reap keep the ended
// attempt as its request's record (for the retention they are given) in the script that ends it,
// and clear counts a served request once in the day's usage stats.
import { describe, expect, test } from 'bun:test'
import libNumbers from '../../lua/lib/numbers.lua' with { type: 'text' }
import { release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import {
  admitFor,
  admitted,
  clearFor,
  freshMarketPerTest,
  type MarketFixture,
  postOffer,
  seedAccount,
} from '../helpers/market.ts'
import { untilRedisPasses } from '../helpers/wait.ts'

let fx: MarketFixture
freshMarketPerTest((fresh) => {
  fx = fresh
})

const HOUR = 3_600_000
const clearOf = (attemptId: string, burn: number) =>
  clearFor(fx, attemptId, burn, { recordRetentionMs: HOUR })
const releaseOf = (attemptId: string, final = false) =>
  release(fx.store, fx.keys, {
    attemptId,
    errorCode: 'upstream_503',
    cooldownMs: 0,
    upstreamBalance: null,
    final,
    recordRetentionMs: HOUR,
  })
const attempt = (id: string) => attemptRecord(fx.store, fx.keys.attempt(id))
const ttl = (id: string) => fx.store.pttl(fx.keys.attempt(id))

/** Today's usage bucket, by Redis's clock (the scripts' own). */
async function servedToday(): Promise<Record<string, string>> {
  const [seconds] = await fx.store.time()
  return fx.store.hgetall(fx.keys.statsDay(new Date(Number(seconds) * 1000).toISOString().slice(0, 10)))
}

describe("an ended attempt is its request's record, written by the script that ends it", () => {
  test('clear keeps the cleared attempt with its cost and usage for the retention, and counts it once', async () => {
    await postOffer(fx, 45, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    const adm = admitted(
      await admitFor(fx, acct, { attemptId: 'sr_aaaaaaaaaaaaaaaaaaaa.1', holdDiem: 10_000 as MicroDiem }),
    )
    expect(await ttl(adm.attemptId)).toBe(-1)
    await clearOf(adm.attemptId, 3_333)
    const kept = await ttl(adm.attemptId)
    expect(kept).toBeGreaterThan(HOUR - 60_000)
    expect(kept).toBeLessThanOrEqual(HOUR)
    await clearOf(adm.attemptId, 3_333)
    expect(await attempt(adm.attemptId)).toMatchObject({
      id: adm.attemptId,
      state: 'cleared',
      accountId: acct,
      offerId: adm.offerId,
      askCents: '45',
      costUsdc: '1500',
      burn: '3333',
      inputTokens: '10',
      outputTokens: '20',
      outcome: 'completed',
      model: 'llama-3.3-70b',
    })
    // Zero and no are not written: metered, no fee, nothing written off, not late.
    const row = await attempt(adm.attemptId)
    for (const field of ['estimated', 'fee', 'writtenOff', 'lateClear', 'tried', 'capGroup'])
      expect(row[field]).toBeUndefined()
    expect(await servedToday()).toEqual({ 'llama-3.3-70b': '1' })
  })

  test('without a retention a record is kept 30 days: the one default, in TypeScript', async () => {
    await postOffer(fx, 45, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    const adm = admitted(await admitFor(fx, acct))
    await clearFor(fx, adm.attemptId, 10)
    expect(await ttl(adm.attemptId)).toBeGreaterThan(30 * 86_400_000 - 60_000)
  })

  test('release keeps the released attempt with its error code, once, saying whether it was the last', async () => {
    await postOffer(fx, 50, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    const first = admitted(await admitFor(fx, acct))
    const last = admitted(await admitFor(fx, acct))
    expect(await releaseOf(first.attemptId)).toBe(true)
    const endedAt = (await attempt(first.attemptId)).endedAt
    await Bun.sleep(5)
    expect(await releaseOf(first.attemptId)).toBe(false)
    expect(await releaseOf(last.attemptId, true)).toBe(true)
    expect(await attempt(first.attemptId)).toMatchObject({
      state: 'released',
      errorCode: 'upstream_503',
      final: '0',
      endedAt,
    })
    expect(await attempt(last.attemptId)).toMatchObject({ state: 'released', final: '1' })
    expect(await ttl(first.attemptId)).toBeGreaterThan(0)
    expect(await servedToday()).toEqual({})
  })

  test('reap keeps each reaped attempt; a late clear of it makes it cleared and counts it once', async () => {
    await postOffer(fx, 50, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    // The long lease first: an admit reaps expired leases, so none may follow the short one.
    const live = admitted(await admitFor(fx, acct))
    const adm = admitted(await admitFor(fx, acct, { leaseMs: 20 }))
    await untilRedisPasses(fx.store, adm.leaseDeadline)
    expect(await reapExpired(fx.store, fx.keys, 100, HOUR)).toBe(1)
    expect(await reapExpired(fx.store, fx.keys, 100, HOUR)).toBe(0)
    expect((await attempt(adm.attemptId)).state).toBe('reaped')
    const kept = await ttl(adm.attemptId)
    expect(kept).toBeGreaterThan(0)
    expect(kept).toBeLessThanOrEqual(HOUR)
    expect(await servedToday()).toEqual({})
    await clearOf(adm.attemptId, 100)
    await clearOf(adm.attemptId, 100)
    expect(await attempt(adm.attemptId)).toMatchObject({ state: 'cleared', lateClear: '1' })
    expect(await servedToday()).toEqual({ 'llama-3.3-70b': '1' })
    expect(await ttl(live.attemptId)).toBe(-1)
  })

  test('a refused admission writes no attempt and counts nothing', async () => {
    const acct = await seedAccount(fx, 1_000_000)
    const refused = await admitFor(fx, acct, { attemptId: 'sr_cccccccccccccccccccc.1' })
    expect(refused.code).toBe(AdmitCode.PoolEmpty)
    expect(await fx.store.exists(fx.keys.attempt('sr_cccccccccccccccccccc.1'))).toBe(0)
    expect(await servedToday()).toEqual({})
  })
})

describe('utc_day', () => {
  test('names the UTC calendar day of a time, across month, year and leap-day edges', async () => {
    const days = [
      '1970-01-01T00:00:00Z',
      '2000-02-29T23:59:59.999Z',
      '2024-02-29T12:00:00Z',
      '2026-11-22T00:00:00Z',
      '2026-12-31T23:59:59.999Z',
      '2027-01-01T00:00:00Z',
      '2100-03-01T00:00:00Z',
    ].map((iso) => Date.parse(iso))
    const script = `${libNumbers}\nbind_globals()\nlocal out = {} for i, ms in ipairs(ARGV) do out[i] = utc_day(tonumber(ms)) end return out`
    const names = await fx.store.eval(script, 0, ...days.map(String))
    expect(names).toEqual(days.map((ms) => new Date(ms).toISOString().slice(0, 10)))
  })
})
