// key.budget.80 and key.budget.100 in the money scripts, on a real Redis with the clock injected into
// admit: written by the clear that first takes a key's spent to 80% and to 100% of its limit, once
// each; again in a new period of a periodic budget, never again for a lifetime one; never by a clear
// that charges nothing nor for a refused request.
import { describe, expect, test } from 'bun:test'
import type { LimitReset } from '../../src/accounts/budget-periods.ts'
import { formatMicros, type MicroDiem } from '../../src/money/units.ts'
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
// At 50 cents, a 1,000 micro-DIEM worst case holds 500 micro-USDC; cleared at 1,000 it charges 500.
const HOLD = 500
// Five full clears reach the limit: the fourth reaches 80% (2,000), the fifth 100%.
const LIMIT = 5 * HOLD
const DAY = Date.parse('2026-03-10T12:00:00.000Z')
const NEXT_DAY = DAY + 86_400_000

/** An account whose key-1 has LIMIT (periodic when `reset`), and an endpoint for the budget events. */
async function budgetedAccount(reset?: LimitReset) {
  await postOffer(fx, 50, 1_000_000_000, { maxInFlight: 100_000 })
  const acct = await seedAccount(fx, 1_000_000_000)
  await fx.store.hset(fx.keys.account(acct), `limit:${KEY}`, LIMIT)
  if (reset) await fx.store.hset(fx.keys.account(acct), `reset:${KEY}`, reset)
  // As lua/webhook-put.lua writes an endpoint, counts its event types, and the account its endpoints.
  await fx.store.hset(fx.keys.webhooks(`acct:${acct}`), 'ep-1', '{}')
  await fx.store.hset(fx.keys.webhookHooks(`acct:${acct}`), 't:key.budget.80', 1, 't:key.budget.100', 1)
  await fx.store.hset(fx.keys.account(acct), 'hooks', 1)
  return acct
}

interface Written {
  type: string
  data: { keyId: string; limitUsdc: string; spentUsdc: string; percent: number }
}

async function written(acct: string): Promise<Written[]> {
  const entries = await fx.store.xrange(fx.keys.webhookEvents(`acct:${acct}`), '-', '+')
  return entries.map(([, fields]) => {
    const map = Object.fromEntries(fields.flatMap((_, i) => (i % 2 ? [] : [[fields[i], fields[i + 1]]])))
    expect(Number(map.at)).toBeGreaterThan(0)
    return { type: map.type as string, data: JSON.parse(map.data as string) }
  })
}

const types = async (acct: string) => (await written(acct)).map((e) => e.type)

/** Admits (at `now` where given) and clears at `burn` (1,000: the full hold, 500 micro-USDC). */
async function spend(acct: string, now?: number, burn = 1_000) {
  const a = admitted(await admitFor(fx, acct, now === undefined ? {} : { now }))
  return clearFor(fx, a.attemptId, burn)
}

const budgetEvent = (pct: 80 | 100, spent: number) => ({
  type: `key.budget.${pct}`,
  data: { keyId: KEY, limitUsdc: '0.002500', spentUsdc: formatMicros(spent), percent: pct },
})

describe('a lifetime limit', () => {
  test('80 and 100 are written once each, by the clears that first reach them; a refusal writes nothing', async () => {
    const acct = await budgetedAccount()
    for (let i = 0; i < 3; i++) await spend(acct)
    expect(await written(acct)).toEqual([])
    await spend(acct)
    expect(await written(acct)).toEqual([budgetEvent(80, 2000)])
    await spend(acct)
    expect(await written(acct)).toEqual([budgetEvent(80, 2000), budgetEvent(100, 2500)])
    // Spent up: the next request is refused, and writes nothing.
    const refused = await admitFor(fx, acct)
    expect(refused.code).toBe(AdmitCode.KeyLimit)
    expect(await types(acct)).toEqual(['key.budget.80', 'key.budget.100'])
  })

  test('a clear that charges nothing writes nothing; one that passes a mark writes it once', async () => {
    const acct = await budgetedAccount()
    for (let i = 0; i < 3; i++) await spend(acct)
    // Charges 0 with the key's spent just short of 80%: nothing crossed.
    const free = await spend(acct, undefined, 0)
    expect(Number(free.charged)).toBe(0)
    expect(await written(acct)).toEqual([])
    await spend(acct, undefined, 900) // 1,950: short of 80% still
    expect(await written(acct)).toEqual([])
    // A clear that takes spent past a mark without landing on it writes it, once; the 50 left can
    // no longer hold a request like it (500): the budget is used up, and 100 is written with it.
    await spend(acct)
    expect(await written(acct)).toEqual([budgetEvent(80, 2450), budgetEvent(100, 2450)])
    expect((await admitFor(fx, acct)).code).toBe(AdmitCode.KeyLimit)
    // A smaller request still fits; it charges nothing and writes nothing.
    const small = admitted(await admitFor(fx, acct, { holdDiem: 100 as MicroDiem }))
    expect(Number((await clearFor(fx, small.attemptId, 0)).charged)).toBe(0)
    expect(await types(acct)).toEqual(['key.budget.80', 'key.budget.100'])
  })

  test('100 once per limit: a raised limit used up again writes it again', async () => {
    const acct = await budgetedAccount()
    for (let i = 0; i < 5; i++) await spend(acct)
    expect(await types(acct)).toEqual(['key.budget.80', 'key.budget.100'])
    // The owner raises the limit (lua/set-key-limit.lua): a new budget, used up, is written again.
    await fx.store.hset(fx.keys.accountKeys(acct), KEY, 'digest-1')
    const raised = await runScript(
      fx.store,
      'setKeyLimit',
      [fx.keys.account(acct), fx.keys.accountKeys(acct), fx.keys.apiKey('digest-1')],
      {
        keyId: KEY,
        keyDigest: 'digest-1',
        limit: LIMIT + 2 * HOLD,
        name: '',
        callerKeyId: '',
        limitReset: '',
        now: '',
      },
    )
    expect(Number((raised as unknown[])[0])).toBe(1)
    // 3,000 of 3,500: past the new 80 % mark, and 500 left still holds a request like it.
    await spend(acct)
    expect(await types(acct)).toEqual(['key.budget.80', 'key.budget.100', 'key.budget.80'])
    await spend(acct)
    expect((await written(acct)).at(-1)).toEqual({
      type: 'key.budget.100',
      data: { keyId: KEY, limitUsdc: '0.003500', spentUsdc: '0.003500', percent: 100 },
    })
    expect(await types(acct)).toHaveLength(4)
  })

  test('the same limit set again, by the key itself, writes no second 100', async () => {
    const acct = await budgetedAccount()
    for (let i = 0; i < 3; i++) await spend(acct)
    await spend(acct, undefined, 900)
    await spend(acct)
    expect(await types(acct)).toEqual(['key.budget.80', 'key.budget.100'])
    await fx.store.hset(fx.keys.accountKeys(acct), KEY, 'digest-1')
    const same = await runScript(
      fx.store,
      'setKeyLimit',
      [fx.keys.account(acct), fx.keys.accountKeys(acct), fx.keys.apiKey('digest-1')],
      {
        keyId: KEY,
        keyDigest: 'digest-1',
        limit: LIMIT,
        name: '',
        callerKeyId: KEY,
        limitReset: '',
        now: '',
      },
    )
    expect(Number((same as unknown[])[0])).toBe(1)
    // 50 left: a smaller request still fits and charges, with the budget used up as before.
    const small = admitted(await admitFor(fx, acct, { holdDiem: 100 as MicroDiem }))
    expect(Number((await clearFor(fx, small.attemptId, 100)).charged)).toBeGreaterThan(0)
    expect(await types(acct)).toEqual(['key.budget.80', 'key.budget.100'])
  })

  test('an account made before its endpoints were counted (no hooks field) is counted at its first clear', async () => {
    const acct = await budgetedAccount()
    await fx.store.hdel(fx.keys.account(acct), 'hooks')
    await spend(acct)
    expect(await fx.store.hget(fx.keys.account(acct), 'hooks')).toBe('1')
    for (let i = 0; i < 4; i++) await spend(acct)
    expect(await written(acct)).toEqual([budgetEvent(80, 2000), budgetEvent(100, 2500)])
  })

  test('counted at 0, an account with no endpoint is not looked up again', async () => {
    const acct = await budgetedAccount()
    await fx.store.hdel(fx.keys.account(acct), 'hooks')
    await fx.store.del(fx.keys.webhooks(`acct:${acct}`))
    await spend(acct)
    expect(await fx.store.hget(fx.keys.account(acct), 'hooks')).toBe('0')
    // Its types left as they were: at 0 the clear reads none of them, so nothing is written.
    for (let i = 0; i < 4; i++) await spend(acct)
    expect(await fx.store.exists(fx.keys.webhookEvents(`acct:${acct}`))).toBe(0)
  })

  test('with no endpoint for the budget events, nothing is written', async () => {
    const acct = await budgetedAccount()
    await fx.store.del(fx.keys.webhookHooks(`acct:${acct}`))
    for (let i = 0; i < 5; i++) await spend(acct)
    expect(await fx.store.exists(fx.keys.webhookEvents(`acct:${acct}`))).toBe(0)
  })
})

describe('a periodic limit', () => {
  test('80 and 100 once each in a period, and again in the next; never for a refusal', async () => {
    const acct = await budgetedAccount('daily')
    for (let i = 0; i < 5; i++) await spend(acct, DAY)
    expect(await written(acct)).toEqual([budgetEvent(80, 2000), budgetEvent(100, 2500)])
    const refused = await admitFor(fx, acct, { now: DAY + 1 })
    expect(refused.code).toBe(AdmitCode.KeyLimit)
    expect(await types(acct)).toHaveLength(2)

    // The next day the key spends from nothing: each mark is reached, and written, once more.
    for (let i = 0; i < 3; i++) await spend(acct, NEXT_DAY)
    expect(await types(acct)).toHaveLength(2)
    await spend(acct, NEXT_DAY)
    await spend(acct, NEXT_DAY)
    expect(await written(acct)).toEqual([
      budgetEvent(80, 2000),
      budgetEvent(100, 2500),
      budgetEvent(80, 2000),
      budgetEvent(100, 2500),
    ])
    expect((await admitFor(fx, acct, { now: NEXT_DAY + 1 })).code).toBe(AdmitCode.KeyLimit)
    expect(await types(acct)).toHaveLength(4)
  })

  test('a clear admitted in a period that has ended writes nothing for the new one', async () => {
    const acct = await budgetedAccount('daily')
    for (let i = 0; i < 3; i++) await spend(acct, DAY)
    // Admitted the day before; the next day's first admission rolls the key's period on.
    const late = admitted(await admitFor(fx, acct, { now: DAY }))
    const today = admitted(await admitFor(fx, acct, { now: NEXT_DAY }))
    await clearFor(fx, late.attemptId, 1_000)
    expect(await written(acct)).toEqual([])
    await clearFor(fx, today.attemptId, 1_000)
    expect(await written(acct)).toEqual([])
  })
})
