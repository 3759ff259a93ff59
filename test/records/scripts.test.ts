// The records' Lua, tested directly against a real Redis: clear, release and reap add the ended
// attempt to the attempts:ended stream in the same script (once each), and record-attempt copies
// an entry into its request record and the day's stats at most once.
import { describe, expect, test } from 'bun:test'
import { AdmitCode } from '../../src/market/result-codes.ts'
import { reapExpired, release } from '../../src/market/settlement.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { runScript } from '../../src/redis/scripts.ts'
import {
  admitFor,
  admitted,
  clearFor,
  freshMarketPerTest,
  type MarketFixture,
  postOffer,
  seedAccount,
} from '../helpers/market.ts'

let fx: MarketFixture
freshMarketPerTest((fresh) => {
  fx = fresh
})

const clearOf = (attemptId: string, burn: number) => clearFor(fx, attemptId, burn)
const releaseOf = (attemptId: string, final = false) =>
  release(fx.redis, fx.keys, {
    attemptId,
    errorCode: 'upstream_503',
    cooldownMs: 0,
    upstreamBalance: null,
    final,
  })

/** The stream's entries as objects. */
async function ended(): Promise<Record<string, string>[]> {
  const entries = await fx.redis.xrange(fx.keys.attemptsEnded, '-', '+')
  return entries.map(([, fields]) => {
    const row: Record<string, string> = {}
    for (let i = 0; i < fields.length; i += 2) row[fields[i]!] = fields[i + 1]!
    return row
  })
}

describe('ended attempts go onto the stream in the script that ends them', () => {
  test('clear adds the cleared attempt with its cost and usage, once; a replay adds nothing', async () => {
    await postOffer(fx, 45, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    const adm = admitted(
      await admitFor(fx, acct, { attemptId: 'sr_aaaaaaaaaaaaaaaaaaaa.1', burnEstimate: 10_000 as MicroDiem }),
    )
    await clearOf(adm.attemptId, 3_333)
    await clearOf(adm.attemptId, 3_333)
    const rows = await ended()
    expect(rows).toHaveLength(1)
    expect(rows[0]).toEqual(await fx.redis.hgetall(fx.keys.attempt(adm.attemptId)))
    expect(rows[0]).toMatchObject({
      id: adm.attemptId,
      state: 'cleared',
      accountId: acct,
      offerId: adm.offerId,
      askCents: '45',
      costUsdc: '1500',
      burn: '3333',
      inputTokens: '10',
      outputTokens: '20',
      estimated: '0',
      outcome: 'completed',
    })
  })

  test('release adds the released attempt with its error code, once, saying whether it was the last', async () => {
    await postOffer(fx, 50, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    const first = admitted(await admitFor(fx, acct))
    const last = admitted(await admitFor(fx, acct))
    expect(await releaseOf(first.attemptId)).toBe(true)
    expect(await releaseOf(first.attemptId)).toBe(false)
    expect(await releaseOf(last.attemptId, true)).toBe(true)
    const rows = await ended()
    expect(rows).toHaveLength(2)
    expect(rows[0]).toMatchObject({
      id: first.attemptId,
      state: 'released',
      errorCode: 'upstream_503',
      final: '0',
    })
    expect(rows[1]).toMatchObject({ id: last.attemptId, state: 'released', final: '1' })
  })

  test('reap adds each reaped attempt; a late clear of it adds the cleared one after', async () => {
    await postOffer(fx, 50, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    const adm = admitted(await admitFor(fx, acct, { leaseMs: 20 }))
    const live = admitted(await admitFor(fx, acct))
    await Bun.sleep(40)
    expect(await reapExpired(fx.redis, fx.keys)).toBe(1)
    expect(await reapExpired(fx.redis, fx.keys)).toBe(0)
    await clearOf(adm.attemptId, 100)
    const rows = await ended()
    expect(rows.map((r) => [r.id, r.state])).toEqual([
      [adm.attemptId, 'reaped'],
      [adm.attemptId, 'cleared'],
    ])
    expect(rows.some((r) => r.id === live.attemptId)).toBe(false)
  })

  test('a refused admission writes nothing to the stream', async () => {
    const acct = await seedAccount(fx, 1_000_000)
    expect((await admitFor(fx, acct)).code).toBe(AdmitCode.PoolEmpty)
    expect(await fx.redis.exists(fx.keys.attemptsEnded)).toBe(0)
  })
})

describe('record-attempt', () => {
  const ref = 'sr_bbbbbbbbbbbbbbbbbbbb'
  const copy = (n: number, end: string, day = '2026-01-02') =>
    runScript(
      fx.redis,
      'recordAttempt',
      [fx.keys.base],
      [ref, n, end, JSON.stringify({ n, end }), 'acct_1', 'req_1', 'llama-3.3-70b', day, 3_600, 7_200],
    )

  test('copies an attempt once; the stats count a served attempt once', async () => {
    expect(await copy(1, 'released')).toBe(1)
    expect(await copy(2, 'cleared')).toBe(1)
    expect(await copy(2, 'cleared')).toBe(0)
    expect(await copy(1, 'released')).toBe(0)
    const record = await fx.redis.hgetall(fx.keys.request(ref))
    expect(record).toMatchObject({
      accountId: 'acct_1',
      requestId: 'req_1',
      model: 'llama-3.3-70b',
      s1: 'released',
      s2: 'cleared',
    })
    expect(JSON.parse(record.a2!)).toEqual({ n: 2, end: 'cleared' })
    expect(await fx.redis.hgetall(fx.keys.statsDay('2026-01-02'))).toEqual({ 'llama-3.3-70b': '1' })
    expect(await fx.redis.ttl(fx.keys.request(ref))).toBeGreaterThan(3_500)
    expect(await fx.redis.ttl(fx.keys.statsDay('2026-01-02'))).toBeGreaterThan(7_100)
  })

  test('a reaped attempt cleared late becomes cleared; an old reap read after a clear never overwrites it', async () => {
    expect(await copy(1, 'reaped')).toBe(1)
    expect(await copy(1, 'cleared')).toBe(1)
    expect(await copy(1, 'reaped')).toBe(0)
    expect((await fx.redis.hgetall(fx.keys.request(ref))).s1).toBe('cleared')
    expect(await fx.redis.hgetall(fx.keys.statsDay('2026-01-02'))).toEqual({ 'llama-3.3-70b': '1' })
  })
})
