// Offers with less left than the market's minimum (SVC_MIN_ROUTABLE_MICRO_DIEM, `minRoutable` on the
// market hash) on one slot: off the ladder in the dry set, so that no request reads them, and back
// when what they have left rises again: a release or a clear giving their hold back, a capacity
// raised, or the reaper's sweep once the minimum is lowered. The cheapest eligible offer is then the cheapest with at least the minimum left; a refusal
// with only dry offers at the price says they lack capacity; the audit checks where each stands.
import { describe, expect, test } from 'bun:test'
import { createLogger } from '../../src/logger.ts'
import { auditMarket } from '../../src/market/audit.ts'
import { ladderDepth } from '../../src/market/capacity.ts'
import { release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import { publishMinRoutable } from '../../src/market/min-routable.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import {
  admitFor,
  admitted,
  clearFor,
  freshMarketPerTest,
  type MarketFixture,
  postOffer,
  scriptForms,
  seedAccount,
} from '../helpers/market.ts'

const silent = createLogger('silent')

let fx: MarketFixture
const MIN = 10_000
const sets = async () => ({
  ladder: await fx.store.zrange(fx.keys.ladder, 0, -1),
  full: await fx.store.zrange(fx.keys.full, 0, -1),
  dry: await fx.store.zrange(fx.keys.dry, 0, -1),
})
const releaseOf = (attemptId: string) =>
  release(fx.store, fx.keys, { attemptId, errorCode: 'upstream_503', cooldownMs: 0, upstreamBalance: null })

describe.each(scriptForms())('as %s', (form) => {
  freshMarketPerTest((each) => {
    fx = each
  }, form)

  test('an offer a hold leaves dry stands aside through its burn; a capacity raised brings it back', async () => {
    await fx.store.hset(fx.keys.market, 'minRoutable', MIN)
    const acct = await seedAccount(fx, 1_000_000_000)
    const cheap = await postOffer(fx, 30, 20_000)
    const dear = await postOffer(fx, 40, 5_000_000)
    // 20,000 - 15,000 held: 5,000 left, below the minimum.
    const big = admitted(await admitFor(fx, acct, { holdDiem: 15_000 as MicroDiem }))
    expect(big.offerId).toBe(cheap)
    expect(await sets()).toEqual({ ladder: [dear], full: [], dry: [cheap] })
    // Its burn leaves 6,000: still dry. A request it could carry goes to the dearer offer.
    await clearFor(fx, big.attemptId, 14_000)
    expect(await sets()).toEqual({ ladder: [dear], full: [], dry: [cheap] })
    const small = admitted(await admitFor(fx, acct))
    expect(small.offerId).toBe(dear)
    await clearFor(fx, small.attemptId, 500)
    expect(await ladderDepth(fx.store, fx.keys, 80)).toEqual(new Map([[40, 5_000_000 - 500]]))
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    // Raised to 30,000: 16,000 left, on the ladder again and the cheapest.
    await fx.offers.update(cheap, { capacity: 30_000 as MicroDiem })
    expect(await sets()).toEqual({ ladder: [cheap, dear], full: [], dry: [] })
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(cheap)
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('a release or a clear that gives the hold back brings a dry offer back, to the full set at its cap', async () => {
    await fx.store.hset(fx.keys.market, 'minRoutable', MIN)
    const acct = await seedAccount(fx, 1_000_000_000)
    const offer = await postOffer(fx, 30, 20_000, { maxInFlight: 2 })
    const held = admitted(await admitFor(fx, acct, { holdDiem: 15_000 as MicroDiem }))
    expect(await sets()).toEqual({ ladder: [], full: [], dry: [offer] })
    await releaseOf(held.attemptId)
    expect(await sets()).toEqual({ ladder: [offer], full: [], dry: [] })
    // Dry by its hold and at its cap: dry; the clear gives most back, the slot still taken by the other.
    const first = admitted(await admitFor(fx, acct))
    const second = admitted(await admitFor(fx, acct, { holdDiem: 12_000 as MicroDiem }))
    expect([first.offerId, second.offerId]).toEqual([offer, offer])
    expect(await sets()).toEqual({ ladder: [], full: [], dry: [offer] })
    await fx.offers.update(offer, { maxInFlight: 1 })
    expect(await sets()).toEqual({ ladder: [], full: [], dry: [offer] })
    await clearFor(fx, second.attemptId, 1_000)
    expect(await sets()).toEqual({ ladder: [], full: [offer], dry: [] })
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    await clearFor(fx, first.attemptId, 1_000)
    expect(await sets()).toEqual({ ladder: [offer], full: [], dry: [] })
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('only dry offers at the price: a refusal for capacity, nothing routable; posted below it: dry at once', async () => {
    await fx.store.hset(fx.keys.market, 'minRoutable', MIN)
    const acct = await seedAccount(fx, 1_000_000_000)
    const tiny = await postOffer(fx, 45, 500)
    expect(await sets()).toEqual({ ladder: [], full: [], dry: [tiny] })
    expect(await admitFor(fx, acct, { holdDiem: 100 as MicroDiem })).toMatchObject({
      code: AdmitCode.InsufficientRoutable,
      eligibleRoutable: 0,
      maxEligibleOffer: 0,
    })
    // Above the buyer's max only: no supply at the price, its ask the cheapest posted.
    await fx.store.hset(fx.keys.account(acct), 'maxPriceCents', 40)
    expect(await admitFor(fx, acct, { holdDiem: 100 as MicroDiem })).toMatchObject({
      code: AdmitCode.NoEligibleSupply,
      buyerMaxCents: 40,
      cheapestPostedCents: 45,
      routableAboveMax: 0,
    })
    expect(await ladderDepth(fx.store, fx.keys, 80)).toEqual(new Map())
  })

  test('the audit names an offer standing where its row does not say', async () => {
    await fx.store.hset(fx.keys.market, 'minRoutable', MIN)
    const roomy = await postOffer(fx, 30, 5_000_000)
    const tiny = await postOffer(fx, 30, 500)
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
    // An earlier build's side of things: each moved by hand into the other's set.
    const [a, b] = [await fx.store.zscore(fx.keys.ladder, roomy), await fx.store.zscore(fx.keys.dry, tiny)]
    await fx.store.zrem(fx.keys.ladder, roomy)
    await fx.store.zrem(fx.keys.dry, tiny)
    await fx.store.zadd(fx.keys.dry, a!, roomy)
    await fx.store.zadd(fx.keys.ladder, b!, tiny)
    const found = await auditMarket(fx.store, fx.keys)
    expect(found.sort((x, y) => (x.problem < y.problem ? -1 : 1))).toEqual([
      { subject: `offer ${roomy}`, problem: 'stands in the dry set where its row says the ladder' },
      { subject: `offer ${tiny}`, problem: 'stands in the ladder where its row says the dry set' },
    ])
    // The next request that reads the one on the ladder sets it aside.
    const acct = await seedAccount(fx, 1_000_000_000)
    expect(await admitFor(fx, acct)).toMatchObject({ code: AdmitCode.InsufficientRoutable })
    expect((await sets()).dry.sort()).toEqual([roomy, tiny].sort())
  })

  test('a minimum lowered: the reaper sweeps the offers dry only by the old one back where they stand', async () => {
    await fx.store.hset(fx.keys.market, 'minRoutable', MIN)
    const acct = await seedAccount(fx, 1_000_000_000)
    const capped = await postOffer(fx, 30, 14_000, { maxInFlight: 1 })
    const dear = await postOffer(fx, 40, 5_000_000)
    // Its one slot taken by a hold that leaves 9,000: dry and at its cap.
    expect(admitted(await admitFor(fx, acct, { holdDiem: 5_000 as MicroDiem })).offerId).toBe(capped)
    const cheap = await postOffer(fx, 32, 5_000)
    const tiny = await postOffer(fx, 34, 500)
    expect(await sets()).toEqual({ ladder: [dear], full: [], dry: [capped, cheap, tiny] })
    // A replica started with a lower minimum: no request reads the dry set, so until a sweep the
    // cheaper offer waits there while requests pay the dearer one.
    await publishMinRoutable(fx.store, fx.keys, 1_000, silent)
    const before = admitted(await admitFor(fx, acct))
    expect(before.offerId).toBe(dear)
    await clearFor(fx, before.attemptId, 100)
    await reapExpired(fx.store, fx.keys)
    expect(await sets()).toEqual({ ladder: [cheap, dear], full: [capped], dry: [tiny] })
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(cheap)
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('the sweep reads the dry set a page a pass, on past those that stay dry', async () => {
    await fx.store.hset(fx.keys.market, 'minRoutable', MIN)
    const acct = await seedAccount(fx, 1_000_000_000)
    // A page's worth of offers that stay dry under any minimum here, all cheaper.
    for (let i = 0; i < 1_000; i++) await postOffer(fx, 30, 100)
    const late = await postOffer(fx, 31, 5_000)
    const dear = await postOffer(fx, 40, 5_000_000)
    await publishMinRoutable(fx.store, fx.keys, 1_000, silent)
    await reapExpired(fx.store, fx.keys)
    expect(await fx.store.zscore(fx.keys.dry, late)).not.toBeNull()
    await reapExpired(fx.store, fx.keys)
    expect(await fx.store.zrange(fx.keys.ladder, 0, -1)).toEqual([late, dear])
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(late)
    expect(await fx.store.zcard(fx.keys.dry)).toBe(1_000)
    // The sweep ran to the end: none is due until the minimum is lowered again.
    expect(await fx.store.hget(fx.keys.market, 'drySwept')).toBeNull()
  })
})
