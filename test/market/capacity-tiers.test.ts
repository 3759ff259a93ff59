// Capacity tiers (lua/lib/ladder.lua): a request whose hold reaches a tier's floor reads none of the
// offers too small for that floor, however many stand cheaper, and takes the cheapest offer that can
// carry it; an offer left in a tier where it no longer belongs is skipped; the tiers are walked only
// once a sweep begun after a replica's start and after the last replica of a build keeping none was
// seen has read the ladder, and what such a build wrote stands in them then; and the tiers stand
// where the offers' rows say after any mix of admits, clears, releases and capacity edits (the
// audit's check).
import { describe, expect, test } from 'bun:test'
import pino from 'pino'
import { ladderFindings } from '../../src/market/audit-ladder.ts'
import { release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import { startReaper } from '../../src/market/reaper.ts'
import { marketSteps } from '../../src/market/steps.ts'
import { armTierSweep } from '../../src/market/tiers.ts'
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
import { ownRedis } from '../helpers/stack.ts'

// Command counts are the whole server's: a server of this file's own.
await ownRedis()

let fx: MarketFixture
const MIN = 10_000

async function hmgets(run: () => Promise<unknown>): Promise<number> {
  const calls = async () =>
    Number(/cmdstat_hmget:calls=(\d+)/.exec(String(await fx.store.info('commandstats')))?.[1] ?? 0)
  const before = await calls()
  await run()
  return (await calls()) - before
}

async function rows(): Promise<Record<string, string>[]> {
  const ids = await fx.store.smembers(fx.keys.offers)
  return Promise.all(ids.map(async (id) => ({ id, ...(await fx.store.hgetall(fx.keys.offer(id))) })))
}

/** A replica of this build starts and its reaper passes once: the tiers are walked from then on. */
async function started(): Promise<void> {
  await armTierSweep(fx.store, fx.keys)
  await reaperPass()
  expect(await fx.store.hget(fx.keys.market, 'tiered')).toBe('1')
}

/** One pass of a replica's reaper, run to its end: it reaps, and tells the sweep what it sees. */
async function reaperPass(): Promise<void> {
  let pass: (() => unknown) | undefined
  const stop = startReaper(
    fx.store,
    fx.keys,
    marketSteps(fx.store, fx.keys),
    1_000,
    pino({ level: 'silent' }),
    undefined,
    (_ms, run) => {
      pass = run
      return () => {}
    },
  )
  pass?.()
  await stop()
}

/** The cheapest active offer with room whose remaining covers `hold`, read from the rows alone. */
async function cheapest(hold: number): Promise<string | undefined> {
  const ladder = await fx.store.zrange(fx.keys.ladder, 0, -1)
  const full = new Set(await fx.store.zrange(fx.keys.full, 0, -1))
  const all = [...ladder, ...full].map(async (id) => ({
    id,
    row: await fx.store.hgetall(fx.keys.offer(id)),
    score: Number(await fx.store.zscore(full.has(id) ? fx.keys.full : fx.keys.ladder, id)),
  }))
  const fits = (await Promise.all(all))
    .filter(({ row }) => {
      const n = (f: string) => Number(row[f] ?? 0)
      return n('capacity') - n('burned') - n('held') >= hold && n('inflight') < n('maxInFlight')
    })
    .sort((a, b) => a.score - b.score)
  return fits[0]?.id
}

describe.each(scriptForms())('as %s', (form) => {
  freshMarketPerTest((each) => {
    fx = each
  }, form)

  test('a larger request reads none of the offers too small for its tier, however many stand cheaper', async () => {
    await fx.store.hset(fx.keys.market, 'minRoutable', MIN)
    const acct = await seedAccount(fx, 1_000_000_000)
    const big = await postOffer(fx, 40, 5_000_000)
    await started()
    const reads = async () =>
      hmgets(async () => {
        const a = await admitFor(fx, acct, { holdDiem: 100_000 as MicroDiem })
        if (a.code !== AdmitCode.Admitted) throw new Error(JSON.stringify(a))
        expect(a.offerId).toBe(big)
        await clearFor(fx, a.attemptId, 50_000)
      })
    const alone = await reads()
    for (let i = 0; i < 40; i++) await postOffer(fx, 30, MIN)
    expect(await reads()).toBe(alone)
    expect(await ladderFindings(fx.store, fx.keys, await rows())).toEqual([])
  })

  test('a replica starting stops the tiers being walked until the sweep it armed has read the ladder', async () => {
    const acct = await seedAccount(fx, 1_000_000_000)
    const cheap = await postOffer(fx, 30, 5_000_000)
    const dear = await postOffer(fx, 40, 5_000_000)
    const paused = await postOffer(fx, 20, 5_000_000)
    await started()
    // As a build keeping no tiers leaves them, run while no replica of this one was there to see it:
    // one put back on the ladder in no tier, one whose ask it raised still at its old score in the
    // tiers, one it paused still in its tiers.
    await asTierlessBuildLeavesThem(cheap, dear, paused)
    // Walked as they are, the tier has a larger request pay the dearer offer.
    const before = admitted(await admitFor(fx, acct, { holdDiem: 200_000 as MicroDiem }))
    expect(before.offerId).toBe(dear)
    await clearFor(fx, before.attemptId, 100)
    // A replica of this build starts: the ladder is walked until its sweep has read it.
    await armTierSweep(fx.store, fx.keys)
    const walked = admitted(await admitFor(fx, acct, { holdDiem: 200_000 as MicroDiem }))
    expect(walked.offerId).toBe(cheap)
    await clearFor(fx, walked.attemptId, 100)
    await reaperPass()
    expect(await fx.store.hget(fx.keys.market, 'tiered')).toBe('1')
    expect(admitted(await admitFor(fx, acct, { holdDiem: 200_000 as MicroDiem })).offerId).toBe(cheap)
    expect(await ladderFindings(fx.store, fx.keys, await rows())).toEqual([])
    expect(await fx.store.hget(fx.keys.market, 'tierSwept')).toBeNull()
  })

  test('while a replica of a build keeping no tiers is seen they are not walked, and once it is gone the next sweep puts its offers in them', async () => {
    const acct = await seedAccount(fx, 1_000_000_000)
    const cheap = await postOffer(fx, 30, 5_000_000)
    const dear = await postOffer(fx, 40, 5_000_000)
    const paused = await postOffer(fx, 20, 5_000_000)
    await started()
    // It starts (a rolling deploy: seen as any replica, not as one keeping the tiers) and writes.
    await fx.store.zadd(fx.keys.replicas, Date.now(), 'tierless:1:abc')
    await reaperPass()
    await asTierlessBuildLeavesThem(cheap, dear, paused)
    const during = admitted(await admitFor(fx, acct, { holdDiem: 200_000 as MicroDiem }))
    expect(during.offerId).toBe(cheap)
    await clearFor(fx, during.attemptId, 100)
    // Passes while it is seen read nothing of the ladder: the sweep waits at its start.
    await reaperPass()
    expect(await fx.store.hget(fx.keys.market, 'tierSwept')).toBe('-inf')
    expect(await fx.store.hget(fx.keys.market, 'tiered')).toBeNull()
    expect(await fx.store.zscore(fx.keys.tiers[0] as string, cheap)).toBeNull()
    // It stops (its stamp goes with it): the next pass sweeps, and the tier holds the cheaper offer.
    await fx.store.zrem(fx.keys.replicas, 'tierless:1:abc')
    await reaperPass()
    expect(await fx.store.hget(fx.keys.market, 'tiered')).toBe('1')
    expect(await fx.store.zrange(fx.keys.tiers[2] as string, 0, -1)).toEqual([cheap, dear])
    expect(admitted(await admitFor(fx, acct, { holdDiem: 200_000 as MicroDiem })).offerId).toBe(cheap)
    expect(await ladderFindings(fx.store, fx.keys, await rows())).toEqual([])
  })

  /** What a build keeping no tiers leaves: `put` back on the ladder in none, `raised` at its old score in them, `paused` in them. */
  async function asTierlessBuildLeavesThem(put: string, raised: string, paused: string) {
    for (const tier of fx.keys.tiers) await fx.store.zrem(tier, put)
    const old = Number(await fx.store.zscore(fx.keys.ladder, put)) - 1
    for (const tier of fx.keys.tiers) await fx.store.zadd(tier, old, raised)
    await fx.store.hset(fx.keys.offer(paused), 'status', 'paused')
    await fx.store.zrem(fx.keys.ladder, paused)
  }

  test('the tier sweep reads the ladder a page a pass, on past the offers it read', async () => {
    await fx.store.hset(fx.keys.market, 'minRoutable', MIN)
    const acct = await seedAccount(fx, 1_000_000_000)
    // A page's worth of offers too small for any tier, all cheaper.
    for (let i = 0; i < 1_000; i++) await postOffer(fx, 30, MIN)
    const late = await postOffer(fx, 31, 5_000_000)
    const dear = await postOffer(fx, 40, 5_000_000)
    for (const tier of fx.keys.tiers) await fx.store.zrem(tier, late)
    await armTierSweep(fx.store, fx.keys)
    await reapExpired(fx.store, fx.keys)
    expect(await fx.store.zscore(fx.keys.tiers[0] as string, late)).toBeNull()
    expect(await fx.store.hget(fx.keys.market, 'tierSwept')).not.toBeNull()
    expect(await fx.store.hget(fx.keys.market, 'tiered')).toBeNull()
    await reapExpired(fx.store, fx.keys)
    expect(await fx.store.hget(fx.keys.market, 'tiered')).toBe('1')
    expect(admitted(await admitFor(fx, acct, { holdDiem: 200_000 as MicroDiem })).offerId).toBe(late)
    expect(await fx.store.zrange(fx.keys.tiers[2] as string, 0, -1)).toEqual([late, dear])
    // The sweep ran to the end: none is due until a replica starts again.
    expect(await fx.store.hget(fx.keys.market, 'tierSwept')).toBeNull()
  })

  test('an offer left in a tier off the ladder is skipped and leaves the tier', async () => {
    const acct = await seedAccount(fx, 1_000_000_000)
    const gone = await postOffer(fx, 30, 5_000_000)
    const other = await postOffer(fx, 40, 5_000_000)
    await started()
    // As a suspension by a build that does not know the tiers leaves it: off the ladder, in its tiers.
    await fx.store.zrem(fx.keys.ladder, gone)
    const a = await admitFor(fx, acct, { holdDiem: 200_000 as MicroDiem })
    expect((a as { offerId: string }).offerId).toBe(other)
    for (const tier of fx.keys.tiers) expect(await fx.store.zscore(tier, gone)).toBeNull()
  })

  test('after any mix of admits, clears, releases and edits, each admit takes the cheapest that fits and the tiers agree', async () => {
    await fx.store.hset(fx.keys.market, 'minRoutable', MIN)
    const acct = await seedAccount(fx, 1_000_000_000_000)
    let seed = 7
    const rand = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
      return seed % n
    }
    const sizes = [MIN, 30_000, 50_000, 200_000, 700_000, 3_000_000]
    const ids: string[] = []
    for (let i = 0; i < 12; i++)
      ids.push(
        await postOffer(fx, 20 + rand(10), sizes[rand(sizes.length)] ?? MIN, { maxInFlight: 1 + rand(3) }),
      )
    await started()
    const open: string[] = []
    for (let step = 0; step < 150; step++) {
      const op = rand(4)
      if (op <= 1) {
        const hold = [1_000, 20_000, 45_000, 170_000, 650_000][rand(5)] ?? 1_000
        const want = await cheapest(hold)
        const a = await admitFor(fx, acct, { holdDiem: hold as MicroDiem, defaultMaxPriceCents: 100 })
        if (a.code === AdmitCode.Admitted) {
          expect(a.offerId).toBe(want as string)
          open.push(a.attemptId)
        } else expect(want).toBeUndefined()
      } else if (op === 2 && open.length) {
        const id = open.splice(rand(open.length), 1)[0] as string
        if (rand(2)) await clearFor(fx, id, rand(60_000))
        else
          await release(fx.store, fx.keys, {
            attemptId: id,
            errorCode: '',
            cooldownMs: 0,
            upstreamBalance: null,
          })
      } else {
        const id = ids[rand(ids.length)] as string
        const row = await fx.store.hgetall(fx.keys.offer(id))
        const used = Number(row.burned ?? 0) + Number(row.held ?? 0)
        await fx.offers.update(id, { capacity: (used + (sizes[rand(sizes.length)] ?? MIN)) as MicroDiem })
      }
      expect(await ladderFindings(fx.store, fx.keys, await rows())).toEqual([])
    }
  })
})
