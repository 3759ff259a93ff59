// Per-key spending limits in the money scripts, on a real Redis: admit counts what the key spent and
// what it holds in flight, clear keeps what was charged through it, release and reap give its holds
// back. The limit, spent and held are the account hash's limit:/spent:/held:<keyId> fields.
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { auditMarket } from '../../src/market/audit.ts'
import { release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
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

const KEY = 'key-1'
const setLimit = (accountId: string, micros: number, keyId = KEY) =>
  fx.store.hset(fx.keys.account(accountId), `limit:${keyId}`, micros)
const keyFields = async (accountId: string, keyId = KEY) => {
  const [limit, spent, held] = await fx.store.hmget(
    fx.keys.account(accountId),
    `limit:${keyId}`,
    `spent:${keyId}`,
    `held:${keyId}`,
  )
  return { limit: limit === null ? null : Number(limit), spent: Number(spent ?? 0), held: Number(held ?? 0) }
}

describe('admit with a key limit', () => {
  // At 50 cents, a 1,000 micro-DIEM worst case holds 500 micro-USDC.
  test('counts holds in flight: a hold that would pass the limit is refused, and nothing moves', async () => {
    await postOffer(fx, 50, 1_000_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    await setLimit(acct, 1_200)
    admitted(await admitFor(fx, acct))
    admitted(await admitFor(fx, acct))
    expect(await keyFields(acct)).toEqual({ limit: 1_200, spent: 0, held: 1_000 })
    const before = await fx.store.hgetall(fx.keys.account(acct))
    const refused = await admitFor(fx, acct)
    expect(refused).toMatchObject({
      code: AdmitCode.KeyLimit,
      limit: 1_200,
      used: 1_000,
      needed: 500,
      askCents: 50,
    })
    expect(await fx.store.hgetall(fx.keys.account(acct))).toEqual(before)
    // Another key of the same account is not limited by this one's.
    admitted(await admitFor(fx, acct, { apiKeyId: 'key-2' }))
  })

  test('the limit is checked before the balance: a limited key is refused 403, never 402', async () => {
    await postOffer(fx, 50, 1_000_000_000)
    const acct = await seedAccount(fx, 100)
    await setLimit(acct, 400)
    expect((await admitFor(fx, acct)).code).toBe(AdmitCode.KeyLimit)
  })

  test('clear keeps what was charged through the key; release and reap give its holds back; a late clear stays within the limit', async () => {
    await postOffer(fx, 50, 1_000_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    await setLimit(acct, 1_000)
    const a = admitted(await admitFor(fx, acct))
    const b = admitted(await admitFor(fx, acct))
    expect((await admitFor(fx, acct)).code).toBe(AdmitCode.KeyLimit)
    await clearFor(fx, a.attemptId, 700) // 350 charged
    // b's replica stopped renewing: its lease deadline is in the past.
    await fx.store.zadd(fx.keys.leases, 1, b.attemptId)
    expect(await reapExpired(fx.store, fx.keys, 10)).toBe(1)
    expect(await keyFields(acct)).toEqual({ limit: 1_000, spent: 350, held: 0 })
    // 650 left: one more 500 hold fits, a second does not.
    const c = admitted(await admitFor(fx, acct))
    expect((await admitFor(fx, acct)).code).toBe(AdmitCode.KeyLimit)
    await release(fx.store, fx.keys, {
      attemptId: c.attemptId,
      errorCode: 'x',
      cooldownMs: 0,
      upstreamBalance: null,
    })
    expect(await keyFields(acct)).toEqual({ limit: 1_000, spent: 350, held: 0 })
    const d = admitted(await admitFor(fx, acct))
    await clearFor(fx, d.attemptId, 1_000) // 500 charged: 850 spent, 150 left
    // A late clear of the reaped attempt charges at most what the limit has left; the rest of its
    // cost is written off, as beyond the balance.
    const late = await clearFor(fx, b.attemptId, 1_000)
    expect([late.charged, late.writtenOff]).toEqual([150, 350] as (typeof late.charged)[])
    expect(await keyFields(acct)).toEqual({ limit: 1_000, spent: 1_000, held: 0 })
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('1,000 concurrent admits on one key whose limit covers 100 holds admit exactly 100', async () => {
    await postOffer(fx, 50, 1_000_000_000_000, { maxInFlight: 100_000 })
    const acct = await seedAccount(fx, 1_000_000_000)
    await setLimit(acct, 100 * 500)
    const results = await Promise.all(
      Array.from({ length: 1_000 }, () => admitFor(fx, acct, { attemptId: randomUUID() })),
    )
    const admittedOnes = results.filter((r) => r.code === AdmitCode.Admitted)
    expect(admittedOnes).toHaveLength(100)
    expect(results.filter((r) => r.code === AdmitCode.KeyLimit)).toHaveLength(900)
    expect(await keyFields(acct)).toEqual({ limit: 50_000, spent: 0, held: 50_000 })
    // Cleared at their full hold, and 1,000 more tried meanwhile: the key ends exactly at its limit.
    const more = Array.from({ length: 1_000 }, () => admitFor(fx, acct, { attemptId: randomUUID() }))
    await Promise.all(
      admittedOnes.map((r) => clearFor(fx, (r as { attemptId: string }).attemptId, 1_000 as MicroDiem)),
    )
    expect((await Promise.all(more)).every((r) => r.code === AdmitCode.KeyLimit)).toBe(true)
    expect(await keyFields(acct)).toEqual({ limit: 50_000, spent: 50_000, held: 0 })
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })
})

describe('audit per key', () => {
  test('names an in-flight count on the account hash that is not its open attempts', async () => {
    await postOffer(fx, 50, 1_000_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    admitted(await admitFor(fx, acct, { apiKeyId: 'key-2' }))
    const account = fx.keys.account(acct)
    expect(await fx.store.hmget(account, 'inflight', 'inflight:key-2')).toEqual(['1', '1'])
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])

    await fx.store.hset(account, 'inflight:key-2', 2)
    await fx.store.hdel(account, 'inflight')
    const problems = (await auditMarket(fx.store, fx.keys)).map((f) => `${f.subject}: ${f.problem}`)
    expect(problems).toEqual([
      `account ${acct}: inflight:key-2 2 != its open attempts 1`,
      `account ${acct}: inflight missing; 1 open attempts`,
    ])
  })

  test("names a key whose spent is not its attempts' charges, is above its limit, or holds what no attempt does", async () => {
    await postOffer(fx, 50, 1_000_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    await setLimit(acct, 1_000)
    await clearFor(fx, admitted(await admitFor(fx, acct)).attemptId, 700)
    admitted(await admitFor(fx, acct, { apiKeyId: 'key-2' }))
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])

    const account = fx.keys.account(acct)
    await fx.store.hset(account, 'spent:key-1', 351, 'held:key-2', 499)
    const problems = (await auditMarket(fx.store, fx.keys)).map((f) => `${f.subject}: ${f.problem}`)
    expect(problems).toContain(`key key-1 of account ${acct}: spent 351 != its attempts' charges 350`)
    expect(problems).toContain(`key key-2 of account ${acct}: held 499 != holds of its open attempts 500`)

    await fx.store.hset(account, 'spent:key-1', 350, 'held:key-2', 500, 'limit:key-1', 300)
    expect(await auditMarket(fx.store, fx.keys)).toEqual([
      { subject: `key key-1 of account ${acct}`, problem: 'spent 350 is above its limit 300' },
    ])
  })

  test('once the Stream was trimmed, the retained charges are checked as at most the key spent', async () => {
    await postOffer(fx, 50, 1_000_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    for (let i = 0; i < 3; i++) await clearFor(fx, admitted(await admitFor(fx, acct)).attemptId, 700)
    await fx.store.xtrim(fx.keys.accountActivity(acct), 'MAXLEN', 1)
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    await fx.store.hset(fx.keys.account(acct), 'spent:key-1', 300)
    expect((await auditMarket(fx.store, fx.keys)).map((f) => f.problem)).toEqual([
      "its retained attempts' charges 350 exceed its spent 300",
    ])
  })
})
