// Periodic key budgets in the money scripts, on a real Redis with the clock injected into admit:
// a limit with reset:<keyId> (daily, weekly, monthly) binds what the key spent in the current UTC
// period (pstart:/pspent:<keyId>) plus its holds in flight; a clear counts in the period its
// request was admitted in, whenever it comes.
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import type { LimitReset } from '../../src/accounts/budget-periods.ts'
import { auditMarket } from '../../src/market/audit.ts'
import { reapExpired } from '../../src/market/leases.ts'
import type { AdmitRefusal } from '../../src/market/refusal-errors.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
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

const KEY = 'key-1'
const at = (iso: string) => Date.parse(iso)
// At 50 cents, a 1,000 micro-DIEM worst case holds 500 micro-USDC; cleared at 1,000 it charges 500.
const HOLD = 500

async function budgetedAccount(limit: number, reset: LimitReset) {
  await postOffer(fx, 50, 1_000_000_000, { maxInFlight: 100_000 })
  const acct = await seedAccount(fx, 1_000_000_000)
  await fx.store.hset(fx.keys.account(acct), `limit:${KEY}`, limit, `reset:${KEY}`, reset)
  return acct
}

const budget = async (acct: string) => {
  const [spent, held, pstart, pspent] = await fx.store.hmget(
    fx.keys.account(acct),
    `spent:${KEY}`,
    `held:${KEY}`,
    `pstart:${KEY}`,
    `pspent:${KEY}`,
  )
  return {
    spent: Number(spent ?? 0),
    held: Number(held ?? 0),
    periodStart: pstart === null ? null : new Date(Number(pstart)).toISOString(),
    periodSpent: Number(pspent ?? 0),
  }
}

/** Admits at `now` and clears at the full hold: HOLD micro-USDC spent in the period of `now`. */
async function spendAt(acct: string, now: number) {
  const a = admitted(await admitFor(fx, acct, { now }))
  await clearFor(fx, a.attemptId, 1_000)
}

describe('a periodic budget across its UTC boundary', () => {
  const cases: { kind: LimitReset; start: string; lastMoment: string; next: string }[] = [
    {
      kind: 'daily',
      start: '2026-03-10T00:00:00.000Z',
      lastMoment: '2026-03-10T23:59:59.999Z',
      next: '2026-03-11T00:00:00.000Z',
    },
    // ISO weeks: Monday 2026-03-09 to Sunday 2026-03-15
    {
      kind: 'weekly',
      start: '2026-03-09T00:00:00.000Z',
      lastMoment: '2026-03-15T23:59:59.999Z',
      next: '2026-03-16T00:00:00.000Z',
    },
    // 2028 is a leap year: February ends on the 29th
    {
      kind: 'monthly',
      start: '2028-02-01T00:00:00.000Z',
      lastMoment: '2028-02-29T23:59:59.999Z',
      next: '2028-03-01T00:00:00.000Z',
    },
  ]
  for (const { kind, start, lastMoment, next } of cases) {
    test(`${kind}: spent in one period binds to its last moment, and the next period starts from nothing`, async () => {
      const acct = await budgetedAccount(2 * HOLD, kind)
      await spendAt(acct, at(start) + 3_600_000)
      await spendAt(acct, at(lastMoment) - 60_000)
      expect(await budget(acct)).toEqual({
        spent: 2 * HOLD,
        held: 0,
        periodStart: start,
        periodSpent: 2 * HOLD,
      })
      const before = await fx.store.hgetall(fx.keys.account(acct))
      const refused = (await admitFor(fx, acct, { now: at(lastMoment) })) as AdmitRefusal
      expect(refused).toMatchObject({
        code: AdmitCode.KeyLimit,
        limit: 2 * HOLD,
        used: 2 * HOLD,
        resetsAt: at(next),
      })
      expect(await fx.store.hgetall(fx.keys.account(acct))).toEqual(before)

      await spendAt(acct, at(next))
      expect(await budget(acct)).toEqual({ spent: 3 * HOLD, held: 0, periodStart: next, periodSpent: HOLD })
      await spendAt(acct, at(next) + 1)
      expect((await admitFor(fx, acct, { now: at(next) + 2 })).code).toBe(AdmitCode.KeyLimit)
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    })
  }

  test('the lifetime limit is the same fields without reset: it never resets', async () => {
    await postOffer(fx, 50, 1_000_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    await fx.store.hset(fx.keys.account(acct), `limit:${KEY}`, HOLD)
    await spendAt(acct, at('2026-03-10T12:00:00.000Z'))
    const refused = (await admitFor(fx, acct, { now: at('2027-03-10T12:00:00.000Z') })) as AdmitRefusal
    expect(refused).toMatchObject({ code: AdmitCode.KeyLimit, used: HOLD, resetsAt: null })
    expect(await budget(acct)).toMatchObject({ periodStart: null, periodSpent: 0 })
  })
})

describe('a clock that goes back', () => {
  test('counts in the period last counted: a period never rolls back, so its spent is never forgotten', async () => {
    const acct = await budgetedAccount(2 * HOLD, 'daily')
    await spendAt(acct, at('2026-03-11T00:00:10.000Z'))
    await spendAt(acct, at('2026-03-11T00:00:20.000Z'))
    // A failover to a Redis whose clock is a minute behind: still the 11th's budget, and spent.
    const refused = (await admitFor(fx, acct, { now: at('2026-03-10T23:59:30.000Z') })) as AdmitRefusal
    expect(refused).toMatchObject({
      code: AdmitCode.KeyLimit,
      used: 2 * HOLD,
      resetsAt: at('2026-03-12T00:00:00.000Z'),
    })
    expect(await budget(acct)).toMatchObject({
      periodStart: '2026-03-11T00:00:00.000Z',
      periodSpent: 2 * HOLD,
    })
  })
})

describe('a clear counts in the period its request was admitted in', () => {
  test('cleared after the boundary, once the key rolled on: in the ended period, so not in the new one', async () => {
    const acct = await budgetedAccount(2 * HOLD, 'daily')
    // Leases long enough that the injected clock reaps neither.
    const late = admitted(
      await admitFor(fx, acct, { now: at('2026-03-10T23:59:00.000Z'), leaseMs: 3_600_000 }),
    )
    // The new day's first admission rolls the period on; the earlier hold still counts while in flight.
    const early = admitted(
      await admitFor(fx, acct, { now: at('2026-03-11T00:01:00.000Z'), leaseMs: 3_600_000 }),
    )
    expect((await admitFor(fx, acct, { now: at('2026-03-11T00:02:00.000Z') })).code).toBe(AdmitCode.KeyLimit)
    await clearFor(fx, late.attemptId, 1_000)
    expect(await budget(acct)).toEqual({
      spent: HOLD,
      held: HOLD,
      periodStart: '2026-03-11T00:00:00.000Z',
      periodSpent: 0,
    })
    await clearFor(fx, early.attemptId, 1_000)
    expect(await budget(acct)).toMatchObject({ spent: 2 * HOLD, held: 0, periodSpent: HOLD })
    // The new day has room for one more hold, as it admitted only one.
    await spendAt(acct, at('2026-03-11T08:00:00.000Z'))
    expect((await admitFor(fx, acct, { now: at('2026-03-11T09:00:00.000Z') })).code).toBe(AdmitCode.KeyLimit)
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('cleared after the boundary, before the key rolled on: in the ended period, and the new one starts from nothing', async () => {
    const acct = await budgetedAccount(2 * HOLD, 'daily')
    await spendAt(acct, at('2026-03-10T10:00:00.000Z'))
    const late = admitted(await admitFor(fx, acct, { now: at('2026-03-10T23:59:00.000Z') }))
    await clearFor(fx, late.attemptId, 1_000)
    expect(await budget(acct)).toMatchObject({
      periodStart: '2026-03-10T00:00:00.000Z',
      periodSpent: 2 * HOLD,
    })
    await spendAt(acct, at('2026-03-11T00:00:00.000Z'))
    await spendAt(acct, at('2026-03-11T00:00:00.001Z'))
    expect(await budget(acct)).toEqual({
      spent: 4 * HOLD,
      held: 0,
      periodStart: '2026-03-11T00:00:00.000Z',
      periodSpent: 2 * HOLD,
    })
  })

  test('a late clear of a reaped request: within its period what the budget has left; after it ended, nothing', async () => {
    const acct = await budgetedAccount(2 * HOLD, 'daily')
    const a = admitted(await admitFor(fx, acct, { now: at('2026-03-10T20:00:00.000Z'), leaseMs: 1 }))
    const b = admitted(await admitFor(fx, acct, { now: at('2026-03-10T21:00:00.000Z'), leaseMs: 1 }))
    await fx.store.zadd(fx.keys.leases, 1, a.attemptId, 1, b.attemptId)
    expect(await reapExpired(fx.store, fx.keys, 10)).toBe(2)
    await spendAt(acct, at('2026-03-10T22:00:00.000Z'))
    // In its period: HOLD left, so a is charged in full.
    const first = await clearFor(fx, a.attemptId, 1_000)
    expect([first.charged, first.writtenOff]).toEqual([HOLD, 0] as (typeof first.charged)[])
    expect(await budget(acct)).toMatchObject({ periodSpent: 2 * HOLD })
    // The next day rolls the period on; b's period ended, so nothing more is charged in it.
    await spendAt(acct, at('2026-03-11T01:00:00.000Z'))
    const second = await clearFor(fx, b.attemptId, 1_000)
    expect([second.charged, second.writtenOff]).toEqual([0, HOLD] as (typeof second.charged)[])
    expect(await budget(acct)).toEqual({
      spent: 3 * HOLD,
      held: 0,
      periodStart: '2026-03-11T00:00:00.000Z',
      periodSpent: HOLD,
    })
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })
})

/** The owner changes the key's limitReset at `now` (lua/set-key-limit.lua): 'none' for a lifetime limit. */
async function changeReset(acct: string, reset: LimitReset | 'none', now: number) {
  await fx.store.hset(fx.keys.accountKeys(acct), KEY, 'digest-1')
  const reply = (await runScript(
    fx.store,
    'setKeyLimit',
    [fx.keys.account(acct), fx.keys.accountKeys(acct), fx.keys.apiKey('digest-1')],
    { keyId: KEY, keyDigest: 'digest-1', limit: '', name: '', callerKeyId: '', limitReset: reset, now },
  )) as unknown[]
  expect(Number(reply[0])).toBe(1)
}

describe('a reset changed while requests are in flight', () => {
  // Leases long enough that the injected clock reaps none.
  const admitAt = async (acct: string, iso: string) =>
    admitted(await admitFor(fx, acct, { now: at(iso), leaseMs: 86_400_000 }))

  test('lifetime made daily: what the requests in flight charge counts in the new period', async () => {
    await postOffer(fx, 50, 1_000_000_000, { maxInFlight: 100_000 })
    const acct = await seedAccount(fx, 1_000_000_000)
    await fx.store.hset(fx.keys.account(acct), `limit:${KEY}`, 2 * HOLD)
    const inFlight = [
      await admitAt(acct, '2026-03-11T10:00:00.000Z'),
      await admitAt(acct, '2026-03-11T10:00:01.000Z'),
    ]
    await changeReset(acct, 'daily', at('2026-03-11T11:00:00.000Z'))
    for (const a of inFlight) await clearFor(fx, a.attemptId, 1_000)
    expect(await budget(acct)).toEqual({
      spent: 2 * HOLD,
      held: 0,
      periodStart: '2026-03-11T00:00:00.000Z',
      periodSpent: 2 * HOLD,
    })
    // The day's budget is used up by what it admitted: the next request waits for tomorrow.
    const refused = (await admitFor(fx, acct, { now: at('2026-03-11T12:00:00.000Z') })) as AdmitRefusal
    expect(refused).toMatchObject({ code: AdmitCode.KeyLimit, used: 2 * HOLD })
    await spendAt(acct, at('2026-03-12T00:00:00.000Z'))
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('daily made weekly mid-week: the day carried over, and its requests in flight count in the week', async () => {
    const acct = await budgetedAccount(3 * HOLD, 'daily')
    // Wednesday: one spent, one in flight; then the owner makes the budget weekly.
    await spendAt(acct, at('2026-03-11T09:00:00.000Z'))
    const a = await admitAt(acct, '2026-03-11T10:00:00.000Z')
    await changeReset(acct, 'weekly', at('2026-03-11T11:00:00.000Z'))
    expect(await budget(acct)).toMatchObject({ periodStart: '2026-03-09T00:00:00.000Z', periodSpent: HOLD })
    await clearFor(fx, a.attemptId, 1_000)
    expect(await budget(acct)).toMatchObject({ spent: 2 * HOLD, held: 0, periodSpent: 2 * HOLD })
    await spendAt(acct, at('2026-03-12T09:00:00.000Z'))
    expect((await admitFor(fx, acct, { now: at('2026-03-13T09:00:00.000Z') })).code).toBe(AdmitCode.KeyLimit)
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('a late clear of a request reaped before the change: within what the new period has left', async () => {
    const acct = await budgetedAccount(2 * HOLD, 'daily')
    const a = admitted(await admitFor(fx, acct, { now: at('2026-03-11T10:00:00.000Z'), leaseMs: 1 }))
    await fx.store.zadd(fx.keys.leases, 1, a.attemptId)
    expect(await reapExpired(fx.store, fx.keys, 10)).toBe(1)
    await changeReset(acct, 'weekly', at('2026-03-11T11:00:00.000Z'))
    await spendAt(acct, at('2026-03-11T12:00:00.000Z'))
    // The week has HOLD left: the late clear charges it, and counts it in the week.
    const late = await clearFor(fx, a.attemptId, 1_000)
    expect([late.charged, late.writtenOff]).toEqual([HOLD, 0] as (typeof late.charged)[])
    expect(await budget(acct)).toMatchObject({ spent: 2 * HOLD, periodSpent: 2 * HOLD })
    expect((await admitFor(fx, acct, { now: at('2026-03-12T09:00:00.000Z') })).code).toBe(AdmitCode.KeyLimit)
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('weekly made daily: a request admitted the day before counts in neither new day', async () => {
    const acct = await budgetedAccount(2 * HOLD, 'weekly')
    const a = await admitAt(acct, '2026-03-10T22:00:00.000Z')
    await changeReset(acct, 'daily', at('2026-03-11T08:00:00.000Z'))
    await clearFor(fx, a.attemptId, 1_000)
    expect(await budget(acct)).toEqual({
      spent: HOLD,
      held: 0,
      periodStart: '2026-03-11T00:00:00.000Z',
      periodSpent: 0,
    })
  })
})

describe('a periodic budget under concurrency', () => {
  test('1,000 concurrent admits against a budget with room for 90 more holds this week admit exactly 90', async () => {
    const acct = await budgetedAccount(100 * HOLD, 'weekly')
    const now = at('2026-03-12T12:00:00.000Z')
    // 10 holds' worth spent last week (ignored) and 10 this week (counted).
    for (let i = 0; i < 10; i++) await spendAt(acct, at('2026-03-06T12:00:00.000Z'))
    for (let i = 0; i < 10; i++) await spendAt(acct, now - 3_600_000)
    const results = await Promise.all(
      Array.from({ length: 1_000 }, () => admitFor(fx, acct, { attemptId: randomUUID(), now })),
    )
    const admittedOnes = results.filter((r) => r.code === AdmitCode.Admitted)
    expect(admittedOnes).toHaveLength(90)
    expect(results.filter((r) => r.code === AdmitCode.KeyLimit)).toHaveLength(910)
    await Promise.all(admittedOnes.map((r) => clearFor(fx, (r as { attemptId: string }).attemptId, 1_000)))
    expect(await budget(acct)).toEqual({
      spent: 110 * HOLD,
      held: 0,
      periodStart: '2026-03-09T00:00:00.000Z',
      periodSpent: 100 * HOLD,
    })
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })
})
