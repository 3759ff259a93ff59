// Admit reads the ladder a page at a time (lua/lib/pick.lua): a request that finds an offer with
// room on the first page reads no more of it, and one that must walk further finds the same offer,
// moves the same offers to the full set and gives the same refusal counts as a walk of the whole
// ladder at once.
import { describe, expect, test } from 'bun:test'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import {
  admitFor,
  admitted,
  freshMarketPerTest,
  type MarketFixture,
  postOffer,
  scriptForms,
  seedAccount,
} from '../helpers/market.ts'

let fx: MarketFixture
const by = (accountId: string) => ({ who: { accountId, apiKeyId: 'key-1' } })
// Many more than the first page (4): a walk past it reads the rest of the ladder.
const MANY = 25
/** `n` offers at `ask`, in posting order (their order on the ladder at one ask). */
const offers = async (n: number, ask: number, capacity: number, maxInFlight = 100) => {
  const ids: string[] = []
  for (let i = 0; i < n; i++) ids.push(await postOffer(fx, ask, capacity, { maxInFlight }))
  return ids
}

describe.each(scriptForms())('as %s', (form) => {
  freshMarketPerTest((each) => {
    fx = each
  }, form)

  test('a request walks past pages of offers too small for it to the first that can carry it', async () => {
    // 500 micro-DIEM each: under the request's 1,000 hold.
    await offers(MANY, 40, 500)
    const big = await postOffer(fx, 45, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(big)
  })

  test('what a request already tried is skipped across pages, cheapest first after it', async () => {
    const ids = await offers(MANY, 40, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    for (const skip of [3, 4, 19, 20, 24]) {
      const tried = ids.slice(0, skip)
      expect(admitted(await admitFor(fx, acct, { tried })).offerId).toBe(ids[skip]!)
    }
    expect(await admitFor(fx, acct, { tried: ids })).toEqual({ code: AdmitCode.SupplyExhausted, ...by(acct) })
  })

  test('the refusal counts every offer at the price, past the first page', async () => {
    await offers(MANY, 40, 500)
    await offers(3, 45, 700)
    // Above the buyer's max (50): not counted.
    await offers(2, 60, 900)
    const acct = await seedAccount(fx, 1_000_000)
    expect(await admitFor(fx, acct)).toEqual({
      code: AdmitCode.InsufficientRoutable,
      eligibleRoutable: MANY * 500 + 3 * 700,
      maxEligibleOffer: 700,
      ...by(acct),
    })
  })

  test('every offer at its cap ahead of the one picked moves to the full set, past the first page', async () => {
    const capped = await offers(MANY, 40, 5_000_000, 1)
    const acct = await seedAccount(fx, 1_000_000)
    // Each takes the last slot of the cheapest with room: off the ladder as it fills.
    for (const id of capped) expect(admitted(await admitFor(fx, acct)).offerId).toBe(id)
    expect(await fx.store.zrange(fx.keys.ladder, 0, -1)).toEqual([])
    // As a build without the full set would leave them: back on the ladder, still at their cap.
    for (const id of capped) {
      const score = (await fx.store.zscore(fx.keys.full, id))!
      await fx.store.zrem(fx.keys.full, id)
      await fx.store.zadd(fx.keys.ladder, score, id)
    }
    const room = await postOffer(fx, 45, 5_000_000)
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(room)
    expect(await fx.store.zrange(fx.keys.ladder, 0, -1)).toEqual([room])
    expect(await fx.store.zrange(fx.keys.full, 0, -1)).toEqual(capped)
    // The next request then finds every capped one on the full set and refuses as busy.
    const busy = await admitFor(fx, acct, { tried: [room] })
    expect(busy).toEqual({ code: AdmitCode.KeysBusy, ...by(acct) })
  })
})
