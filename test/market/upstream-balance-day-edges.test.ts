// An upstream balance is believed only on the UTC day it was learned (lua/lib/offers read_offer).
// A lost admission's clear does not know when the request was admitted: a balance it reports may be
// from before midnight's reset, so it is not recorded as today's. A key changed by the operator's
// PATCH is another key: the old key's balance (a 402's 0) no longer says anything of the offer. A
// key's check at posting tells a balance for the day the check was sent, written with that key only.
import { expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { release } from '../../src/market/clearing.ts'
import { marketSteps } from '../../src/market/steps.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { dayOf } from '../../src/records/days.ts'
import { redisNow } from '../../src/redis/clock.ts'
import {
  admitFor,
  admitted,
  freshMarketPerTest,
  type MarketFixture,
  meteredClear,
  postOffer,
  seedAccount,
} from '../helpers/market.ts'
import { saveKeys } from '../helpers/saved-keys.ts'

let fx: MarketFixture
freshMarketPerTest((fresh) => {
  fx = fresh
})

const DAY_MS = 86_400_000
const HOLD = 1_000 as MicroDiem

test("a lost admission made before midnight, cleared after it, does not record its balance as the new day's", async () => {
  const offer = await postOffer(fx, 30, 5_000_000)
  const acct = await seedAccount(fx, 1_000_000)
  const before = await saveKeys(fx.store, fx.keys.prefix)
  // Admitted yesterday (23:59:59.9), then the store failed over to a replica that never saw it.
  const lost = admitted(await admitFor(fx, acct, { now: Date.now() - DAY_MS, holdDiem: HOLD }))
  await before.restore()
  // The upstream answered before its reset: 100 left of yesterday's allocation.
  const { attemptId: _, ...rest } = meteredClear('', 400, { upstreamBalanceAfter: 100 as MicroDiem })
  const cleared = await marketSteps(fx.store, fx.keys).clear(lost, rest)
  expect(cleared).toMatchObject({ admissionLost: true })
  expect(cleared.balanceDay).toBeUndefined()
  expect(await fx.store.hget(fx.keys.offer(offer), 'balance')).toBe('')
  // Today's allocation is whole: the offer takes requests.
  expect(admitted(await admitFor(fx, acct, { holdDiem: HOLD })).offerId).toBe(offer)
})

test("the operator's PATCH of an offer's upstream key forgets the old key's balance", async () => {
  const offer = await postOffer(fx, 30, 5_000_000)
  const acct = await seedAccount(fx, 1_000_000)
  const a = admitted(await admitFor(fx, acct, { holdDiem: HOLD }))
  // The old key ran dry: a 402 records it as empty, today.
  await release(fx.store, fx.keys, {
    attemptId: a.attemptId,
    upstreamGen: a.upstreamGen,
    errorCode: 'upstream_out_of_balance',
    cooldownMs: 0,
    upstreamBalance: 0 as MicroDiem,
  })
  expect(await fx.store.hmget(fx.keys.offer(offer), 'balance', 'balanceDay')).toEqual([
    '0',
    String(dayOf(Date.now())),
  ])
  expect((await admitFor(fx, acct, { holdDiem: HOLD })).code).not.toBe(1)
  // The operator puts a funded key in its place.
  const patched = await fx.offers.update(offer, { upstreamApiKey: 'a-new-funded-key' })
  expect(patched.upstreamBalanceDiem).toBeNull()
  expect(admitted(await admitFor(fx, acct, { holdDiem: HOLD })).offerId).toBe(offer)
  // A change of anything else keeps what is known of the key.
  const b = admitted(await admitFor(fx, acct, { holdDiem: HOLD }))
  await release(fx.store, fx.keys, {
    attemptId: b.attemptId,
    upstreamGen: b.upstreamGen,
    errorCode: 'upstream_out_of_balance',
    cooldownMs: 0,
    upstreamBalance: 0 as MicroDiem,
  })
  expect((await fx.offers.update(offer, { askCents: 31 })).upstreamBalanceDiem).toBe('0.000000')
})

test('an offer written before the balance had a day (no balanceDay), its balance 0, is routable', async () => {
  const offer = await postOffer(fx, 30, 5_000_000)
  const acct = await seedAccount(fx, 1_000_000)
  await fx.store.hdel(fx.keys.offer(offer), 'balanceDay')
  await fx.store.hset(fx.keys.offer(offer), 'balance', '0')
  expect((await fx.offers.get(offer))?.upstreamBalanceDiem).toBeNull()
  expect(admitted(await admitFor(fx, acct, { holdDiem: HOLD })).offerId).toBe(offer)
})

test("a key's check told a balance: known for the day the check was sent, and only with that key", async () => {
  const now = await redisNow(fx.store)
  const create = (micros: number, since: number) =>
    fx.offers.create({
      upstreamBaseUrl: 'http://127.0.0.1:1',
      upstreamApiKey: `upstream-${randomUUID()}`,
      askCents: 30,
      capacity: 5_000_000 as MicroDiem,
      upstreamBalance: { micros: micros as MicroDiem, since },
    })
  // Sent before midnight, answered after it: the balance may be from before the reset.
  const late = await create(0, now - DAY_MS)
  expect(late.upstreamBalanceDiem).toBeNull()
  expect(await fx.store.hmget(fx.keys.offer(late.id), 'balance', 'balanceDay')).toEqual(['', ''])
  const offer = (await create(2_000_000, now)).id
  expect(await fx.store.hmget(fx.keys.offer(offer), 'balance', 'balanceDay')).toEqual([
    '2000000',
    String(dayOf(now)),
  ])
  // A change that writes no key writes no balance: it was told for a key this change did not bring.
  const asked = await fx.offers.update(offer, {
    askCents: 31,
    upstreamBalance: { micros: 0 as MicroDiem, since: now },
  })
  expect(asked.upstreamBalanceDiem).toBe('2.000000')
  // A new key, with its own balance: on the new generation, which a request on the old one cannot move.
  const acct = await seedAccount(fx, 1_000_000)
  const old = admitted(await admitFor(fx, acct, { holdDiem: HOLD }))
  const changed = await fx.offers.update(offer, {
    upstreamApiKey: 'a-new-key',
    upstreamBalance: { micros: 3_000_000 as MicroDiem, since: now },
  })
  expect(changed.upstreamBalanceDiem).toBe('3.000000')
  expect(await fx.store.hget(fx.keys.offer(offer), 'upstreamGen')).toBe('1')
  await release(fx.store, fx.keys, {
    attemptId: old.attemptId,
    upstreamGen: old.upstreamGen,
    errorCode: 'upstream_out_of_balance',
    cooldownMs: 0,
    upstreamBalance: 0 as MicroDiem,
  })
  expect((await fx.offers.get(offer))?.upstreamBalanceDiem).toBe('3.000000')
})
