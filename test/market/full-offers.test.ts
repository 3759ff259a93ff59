// Offers at their in-flight cap on one slot: off the ladder the requests walk, in the full set,
// until a clear, release or reap gives a slot back; corrected both ways by the next request that
// reads it (and out of the full set by the reaper's pass) where a build that does not know the full
// set left one on the wrong side. Refusals, quotes and the
// capacity snapshot answer as if both sets were one; pausing, deleting or suspending an offer
// takes it out of both; a migration apart puts the full set back on the ladder.
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { migrateApart } from '../../src/cli/migrate-apart.ts'
import { auditMarket } from '../../src/market/audit.ts'
import { ladderDepth } from '../../src/market/capacity.ts'
import { release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { SupplierStore } from '../../src/suppliers/store.ts'
import {
  admitFor,
  admitted,
  clearFor,
  freshMarketPerTest,
  type MarketFixture,
  postOffer,
  scriptForms,
  seedAccount,
  seedSupplier,
} from '../helpers/market.ts'
import { untilRedisPasses } from '../helpers/wait.ts'

let fx: MarketFixture
const by = (accountId: string) => ({ who: { accountId, apiKeyId: 'key-1' } })
// Both sets' members, cheapest first.
const sets = async () => ({
  ladder: await fx.store.zrange(fx.keys.ladder, 0, -1),
  full: await fx.store.zrange(fx.keys.full, 0, -1),
})
const releaseOf = (attemptId: string) =>
  release(fx.store, fx.keys, { attemptId, errorCode: 'upstream_503', cooldownMs: 0, upstreamBalance: null })
// An earlier build's side of things: the ladder's score of an offer, moved by hand.
const moveByHand = async (id: string, from: string, to: string) => {
  const score = (await fx.store.zscore(from, id))!
  await fx.store.zrem(from, id)
  await fx.store.zadd(to, score, id)
}

describe.each(scriptForms())('as %s', (form) => {
  freshMarketPerTest((each) => {
    fx = each
  }, form)

  test('the offer whose last slot admit takes leaves the ladder; a clear or release brings it back', async () => {
    const first = await postOffer(fx, 40, 5_000_000, { maxInFlight: 1 })
    const second = await postOffer(fx, 40, 5_000_000, { maxInFlight: 1 })
    const scores = [
      await fx.store.zscore(fx.keys.ladder, first),
      await fx.store.zscore(fx.keys.ladder, second),
    ]
    const acct = await seedAccount(fx, 1_000_000)

    const a1 = admitted(await admitFor(fx, acct))
    expect(a1.offerId).toBe(first)
    expect(await sets()).toEqual({ ladder: [second], full: [first] })
    // The next request walks the ladder alone: the full offer is not on it.
    const a2 = admitted(await admitFor(fx, acct))
    expect(a2.offerId).toBe(second)
    expect(await sets()).toEqual({ ladder: [], full: [first, second] })
    expect(await admitFor(fx, acct)).toEqual({ code: AdmitCode.KeysBusy, ...by(acct) })

    await clearFor(fx, a1.attemptId, 500)
    expect(await sets()).toEqual({ ladder: [first], full: [second] })
    expect(await releaseOf(a2.attemptId)).toBe(true)
    expect(await sets()).toEqual({ ladder: [first, second], full: [] })
    // Each back at the score it had: its ask and posting order.
    expect([
      await fx.store.zscore(fx.keys.ladder, first),
      await fx.store.zscore(fx.keys.ladder, second),
    ]).toEqual(scores)
    // A clear replayed gives nothing back twice, and moves nothing.
    await clearFor(fx, a1.attemptId, 500)
    expect(await sets()).toEqual({ ladder: [first, second], full: [] })
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('a reaped lease gives the slot back too; a slot below the cap moves nothing', async () => {
    const only = await postOffer(fx, 40, 5_000_000, { maxInFlight: 2 })
    const acct = await seedAccount(fx, 1_000_000)
    const long = admitted(await admitFor(fx, acct))
    expect(await sets()).toEqual({ ladder: [only], full: [] })
    const short = admitted(await admitFor(fx, acct, { leaseMs: 100 }))
    expect(await sets()).toEqual({ ladder: [], full: [only] })
    await untilRedisPasses(fx.store, short.leaseDeadline)
    expect(await reapExpired(fx.store, fx.keys)).toBe(1)
    expect(await sets()).toEqual({ ladder: [only], full: [] })
    await clearFor(fx, long.attemptId, 500)
    expect(await sets()).toEqual({ ladder: [only], full: [] })
    expect(await auditMarket(fx.store, fx.keys)).toEqual([])
  })

  test('an offer an earlier build left at its cap on the ladder moves to the full set on the next admit', async () => {
    const capped = await postOffer(fx, 35, 5_000_000, { maxInFlight: 1 })
    const roomy = await postOffer(fx, 40, 5_000_000, { maxInFlight: 5 })
    const acct = await seedAccount(fx, 1_000_000)
    // An earlier build admitted on it and left it where it was.
    await fx.store.hset(fx.keys.offer(capped), 'inflight', 1)
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(roomy)
    expect(await sets()).toEqual({ ladder: [roomy], full: [capped] })
  })

  test('an offer an earlier build freed in the full set is moved back and picked when the ladder has none', async () => {
    const freed = await postOffer(fx, 35, 5_000_000, { maxInFlight: 2 })
    const busy = await postOffer(fx, 40, 5_000_000, { maxInFlight: 1 })
    const acct = await seedAccount(fx, 1_000_000)
    await fx.store.hset(fx.keys.offer(busy), 'inflight', 1)
    // In the full set with room: an earlier build's clear gave its slot back without moving it.
    await moveByHand(freed, fx.keys.ladder, fx.keys.full)
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(freed)
    expect(await sets()).toEqual({ ladder: [freed], full: [busy] })
  })

  test('an offer an earlier build freed in the full set goes back to the ladder at the next reaper pass', async () => {
    const freed = await postOffer(fx, 35, 5_000_000, { maxInFlight: 2 })
    const capped = await postOffer(fx, 38, 5_000_000, { maxInFlight: 1 })
    const dear = await postOffer(fx, 40, 5_000_000, { maxInFlight: 5 })
    const acct = await seedAccount(fx, 1_000_000)
    await fx.store.hset(fx.keys.offer(capped), 'inflight', 1)
    await moveByHand(capped, fx.keys.ladder, fx.keys.full)
    await moveByHand(freed, fx.keys.ladder, fx.keys.full)
    // While it waits there, the ladder's dearer offer takes the requests.
    const first = admitted(await admitFor(fx, acct))
    expect(first.offerId).toBe(dear)
    await clearFor(fx, first.attemptId, 500)
    expect(await reapExpired(fx.store, fx.keys)).toBe(0)
    // The one with room is back on the ladder; the one at its cap stays in the full set.
    expect(await sets()).toEqual({ ladder: [freed, dear], full: [capped] })
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(freed)
  })

  test('a busy refusal stops at the first busy offer in the full set; one freed behind it waits for the reaper', async () => {
    const capped = await postOffer(fx, 35, 5_000_000, { maxInFlight: 1 })
    const freed = await postOffer(fx, 38, 5_000_000, { maxInFlight: 2 })
    const acct = await seedAccount(fx, 1_000_000)
    await fx.store.hset(fx.keys.offer(capped), 'inflight', 1)
    await moveByHand(capped, fx.keys.ladder, fx.keys.full)
    await moveByHand(freed, fx.keys.ladder, fx.keys.full)
    // The cheaper one is busy: the walk ends there, and nothing moves.
    expect(await admitFor(fx, acct)).toEqual({ code: AdmitCode.KeysBusy, ...by(acct) })
    expect(await sets()).toEqual({ ladder: [], full: [capped, freed] })
    // Tried, the busy one proves nothing: the walk goes on to the one with room.
    const retried = admitted(await admitFor(fx, acct, { tried: [capped] }))
    expect(retried.offerId).toBe(freed)
    await clearFor(fx, retried.attemptId, 500)
    // Freed in the full set again by an earlier build: the reaper's pass puts it back.
    await moveByHand(freed, fx.keys.ladder, fx.keys.full)
    expect(await admitFor(fx, acct)).toEqual({ code: AdmitCode.KeysBusy, ...by(acct) })
    expect(await reapExpired(fx.store, fx.keys)).toBe(0)
    expect(await sets()).toEqual({ ladder: [freed], full: [capped] })
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(freed)
  })

  test('refusals, the quote and the capacity snapshot are the same with offers in the full set', async () => {
    const cheap = await postOffer(fx, 40, 5_000_000, { maxInFlight: 1 })
    const dear = await postOffer(fx, 45, 3_000_000, { maxInFlight: 1 })
    const above = await postOffer(fx, 60, 2_000_000, { maxInFlight: 1 })
    const acct = await seedAccount(fx, 1_000_000, 60)
    for (const id of [cheap, dear, above]) expect(admitted(await admitFor(fx, acct)).offerId).toBe(id)
    expect(await sets()).toEqual({ ladder: [], full: [cheap, dear, above] })

    // Every offer at its cap: busy (-7); all tried: exhausted (-8).
    expect(await admitFor(fx, acct)).toEqual({ code: AdmitCode.KeysBusy, ...by(acct) })
    expect(await admitFor(fx, acct, { tried: [cheap, dear, above] })).toEqual({
      code: AdmitCode.SupplyExhausted,
      ...by(acct),
    })
    // Too big for any (-6): the routable of all three and the largest.
    expect(await admitFor(fx, acct, { holdDiem: 5_000_000 as MicroDiem })).toEqual({
      code: AdmitCode.InsufficientRoutable,
      ...by(acct),
      eligibleRoutable: 9_997_000,
      maxEligibleOffer: 4_999_000,
    })
    // A buyer whose max is below them all (-5): the cheapest ask and what stands above it.
    const low = await seedAccount(fx, 1_000_000, 30)
    expect(await admitFor(fx, low)).toEqual({
      code: AdmitCode.NoEligibleSupply,
      ...by(low),
      buyerMaxCents: 30,
      cheapestPostedCents: 40,
      routableAboveMax: 9_997_000,
    })
    const quote = await runScript(fx.store, 'quote', [fx.keys.base], {
      accountId: acct,
      holdDiem: 1_000,
      defaultMaxPriceCents: 50,
    })
    expect(quote).toEqual([-7])
    // Busy, not gone: the snapshot counts each at its ask.
    expect([...(await ladderDepth(fx.store, fx.keys, 80))]).toEqual([
      [40, 4_999_000],
      [45, 2_999_000],
      [60, 1_999_000],
    ])
    expect([...(await ladderDepth(fx.store, fx.keys, 45))]).toEqual([
      [40, 4_999_000],
      [45, 2_999_000],
    ])
    // Nothing read moved an offer back: none has room.
    expect(await sets()).toEqual({ ladder: [], full: [cheap, dear, above] })
  })

  test('the snapshot keeps ask order across both sets', async () => {
    const full = await postOffer(fx, 40, 5_000_000, { maxInFlight: 1 })
    const cheap = await postOffer(fx, 35, 1_000_000)
    await postOffer(fx, 45, 2_000_000)
    const acct = await seedAccount(fx, 1_000_000, 40)
    expect(admitted(await admitFor(fx, acct)).offerId).toBe(cheap)
    await fx.store.hset(fx.keys.offer(full), 'inflight', 1)
    await moveByHand(full, fx.keys.ladder, fx.keys.full)
    expect([...(await ladderDepth(fx.store, fx.keys, 80))]).toEqual([
      [35, 999_000],
      [40, 5_000_000],
      [45, 2_000_000],
    ])
  })

  test('pausing, deleting or suspending a full offer takes it out of both sets', async () => {
    const acct = await seedAccount(fx, 1_000_000)
    const paused = await postOffer(fx, 40, 5_000_000, { maxInFlight: 1 })
    admitted(await admitFor(fx, acct))
    expect(await sets()).toEqual({ ladder: [], full: [paused] })
    await fx.offers.update(paused, { status: 'paused' })
    expect(await sets()).toEqual({ ladder: [], full: [] })
    // Active again, still at its cap: in the full set, where its row says it stands.
    await fx.offers.update(paused, { status: 'active' })
    expect(await sets()).toEqual({ ladder: [], full: [paused] })
    expect(await admitFor(fx, acct)).toEqual({ code: AdmitCode.KeysBusy, ...by(acct) })
    expect(await sets()).toEqual({ ladder: [], full: [paused] })
    // Repriced: in the full set at its new ask.
    await fx.offers.update(paused, { askCents: 45 })
    expect(await sets()).toEqual({ ladder: [], full: [paused] })
    expect(Number(await fx.store.zscore(fx.keys.full, paused))).toBeGreaterThanOrEqual(45_000_000_000)
    expect(await admitFor(fx, acct)).toEqual({ code: AdmitCode.KeysBusy, ...by(acct) })
    await fx.offers.remove(paused)
    expect(await sets()).toEqual({ ladder: [], full: [] })

    const supplierId = await seedSupplier(fx)
    const own = (
      await fx.offers.create({
        upstreamBaseUrl: 'http://127.0.0.1:1',
        upstreamApiKey: `upstream-${randomUUID()}`,
        askCents: 40,
        capacity: 5_000_000 as MicroDiem,
        maxInFlight: 1,
        supplierId,
      })
    ).id
    admitted(await admitFor(fx, acct))
    expect(await sets()).toEqual({ ladder: [], full: [own] })
    const suppliers = new SupplierStore(fx.store, fx.keys)
    await suppliers.setStatus(supplierId, 'suspended')
    expect(await sets()).toEqual({ ladder: [], full: [] })
    await suppliers.setStatus(supplierId, 'active')
    expect(await sets()).toEqual({ ladder: [], full: [own] })
  })

  test('a migration apart lists the offers of the full set on the ladder', async () => {
    const full = await postOffer(fx, 40, 5_000_000, { maxInFlight: 1 })
    const roomy = await postOffer(fx, 45, 5_000_000)
    const score = await fx.store.zscore(fx.keys.ladder, full)
    // Left in the full set with nothing in flight: a migration refuses open requests.
    await moveByHand(full, fx.keys.ladder, fx.keys.full)
    expect(await migrateApart(fx.store, fx.keys.prefix, { seenWithinMs: 10_000, say: () => {} })).toBe(true)
    const apart = keyspace(fx.keys.prefix, 'apart')
    expect(await fx.store.zrange(apart.ladder, 0, -1)).toEqual([full, roomy])
    expect(await fx.store.zscore(apart.ladder, full)).toBe(score)
    expect(await fx.store.exists(fx.keys.full)).toBe(0)
  })
})
