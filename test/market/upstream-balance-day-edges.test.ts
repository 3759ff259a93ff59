// An upstream balance is believed only on the UTC day it was learned (lua/lib/offers read_offer).
// A lost admission's clear does not know when the request was admitted: a balance it reports may be
// from before midnight's reset, so it is not recorded as today's. A key changed by the operator's
// PATCH is another key: the old key's balance (a 402's 0) no longer says anything of the offer.
import { expect, test } from 'bun:test'
import { release } from '../../src/market/clearing.ts'
import { marketSteps } from '../../src/market/steps.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { dayOf } from '../../src/records/days.ts'
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
