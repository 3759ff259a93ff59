// A supplier key's upstream balance holds on the UTC day it was learned: its DIEM allocation resets
// at 00:00 UTC (shared/upstream/billing.md). A 402 (balance 0) takes the offer off the ladder for
// the rest of that day only; the next day it is routable again, though no call refreshed it. A
// request admitted before midnight and ended after it reports a balance from before the reset:
// never recorded as the new day's. Admit takes its time now as an argument (ARGV now); the clear and
// the release run on Redis's clock, so "yesterday" is an admission made at now - 1 day.
import { expect, test } from 'bun:test'
import type { Admission } from '../../src/market/admission.ts'
import { ladderDepth } from '../../src/market/capacity.ts'
import { release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { dayOf } from '../../src/records/days.ts'
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

const DAY_MS = 86_400_000
const HOLD = 1_000 as MicroDiem

/** A 402 from the supplier: the release records its key as empty (src/inference/supplier.ts). */
function outOfBalance({ attemptId, upstreamGen }: Admission) {
  return release(fx.store, fx.keys, {
    attemptId,
    upstreamGen,
    errorCode: 'upstream_out_of_balance',
    cooldownMs: 0,
    upstreamBalance: 0 as MicroDiem,
  })
}

test('a 402 keeps the offer off the ladder for the rest of its UTC day; the next day it is admitted again', async () => {
  const offer = await postOffer(fx, 30, 5_000_000)
  const acct = await seedAccount(fx, 1_000_000)
  const today = Date.now()
  expect(await outOfBalance(admitted(await admitFor(fx, acct, { now: today })))).toBe(true)
  expect(await fx.store.hget(fx.keys.offer(offer), 'balance')).toBe('0')
  // The rest of the day: nothing routable, however often asked.
  expect((await admitFor(fx, acct, { now: today })).code).toBe(AdmitCode.InsufficientRoutable)
  const lastMs = (dayOf(today) + 1) * DAY_MS - 1
  expect((await admitFor(fx, acct, { now: lastMs })).code).toBe(AdmitCode.InsufficientRoutable)
  // 00:00 UTC: the allocation reset. No call refreshed the balance, yet the offer takes requests.
  const next = admitted(await admitFor(fx, acct, { now: lastMs + 1, holdDiem: HOLD }))
  expect(next.offerId).toBe(offer)
  // The admission does not pass on yesterday's balance as the one before this request.
  expect(next.upstreamBalance).toBeNull()
})

test("a balance learned on an earlier day reads as unknown: the offer's view, the capacity figures", async () => {
  const offer = await postOffer(fx, 30, 5_000_000)
  await fx.store.hset(fx.keys.offer(offer), 'balance', '0', 'balanceDay', dayOf(Date.now()) - 1)
  expect((await fx.offers.get(offer))?.upstreamBalanceDiem).toBeNull()
  expect([...(await ladderDepth(fx.store, fx.keys, 80))]).toEqual([[30, 5_000_000]])
  // Learned today, it caps both.
  await fx.store.hset(fx.keys.offer(offer), 'balanceDay', dayOf(Date.now()))
  expect((await fx.offers.get(offer))?.upstreamBalanceDiem).toBe('0.000000')
  expect([...(await ladderDepth(fx.store, fx.keys, 80))]).toEqual([])
})

test("a request admitted before midnight and cleared after it does not record its balance as the new day's", async () => {
  const offer = await postOffer(fx, 30, 5_000_000)
  const acct = await seedAccount(fx, 1_000_000)
  const yesterday = admitted(await admitFor(fx, acct, { now: Date.now() - DAY_MS, holdDiem: HOLD }))
  // The supplier's pre-call header said 500 left (before the reset): 500 - 400 burned after.
  await clearFor(fx, yesterday.attemptId, 400, {
    upstreamBalanceAfter: 100 as MicroDiem,
    upstreamGen: yesterday.upstreamGen,
  })
  expect(await fx.store.hget(fx.keys.offer(offer), 'balance')).toBe('')
  const now = admitted(await admitFor(fx, acct, { holdDiem: HOLD }))
  expect(now.offerId).toBe(offer)
  // Admitted today, cleared today: the balance after is recorded, on today, and caps the offer.
  await clearFor(fx, now.attemptId, 400, {
    upstreamBalanceAfter: 100 as MicroDiem,
    upstreamGen: now.upstreamGen,
  })
  expect(await fx.store.hmget(fx.keys.offer(offer), 'balance', 'balanceDay')).toEqual([
    '100',
    String(dayOf(Date.now())),
  ])
  expect((await admitFor(fx, acct, { holdDiem: HOLD })).code).toBe(AdmitCode.InsufficientRoutable)
})

test('a 402 answered to a request admitted before midnight and released after it does not empty the new day', async () => {
  const offer = await postOffer(fx, 30, 5_000_000)
  const acct = await seedAccount(fx, 1_000_000)
  const yesterday = admitted(await admitFor(fx, acct, { now: Date.now() - DAY_MS, holdDiem: HOLD }))
  expect(await outOfBalance(yesterday)).toBe(true)
  expect(await fx.store.hget(fx.keys.offer(offer), 'balance')).toBe('')
  expect(admitted(await admitFor(fx, acct, { holdDiem: HOLD })).offerId).toBe(offer)
})

test('a late clear (its lease reaped) across midnight does not record its balance either', async () => {
  const offer = await postOffer(fx, 30, 5_000_000)
  const acct = await seedAccount(fx, 1_000_000)
  const yesterday = admitted(await admitFor(fx, acct, { now: Date.now() - DAY_MS, holdDiem: HOLD }))
  // Its lease ran out yesterday: reaped, its hold and capacity given back.
  expect(await reapExpired(fx.store, fx.keys)).toBe(1)
  const late = await clearFor(fx, yesterday.attemptId, 400, {
    upstreamBalanceAfter: 100 as MicroDiem,
    upstreamGen: yesterday.upstreamGen,
  })
  expect(late.charged).toBeGreaterThan(0)
  expect(await fx.store.hget(fx.keys.offer(offer), 'balance')).toBe('')
})
