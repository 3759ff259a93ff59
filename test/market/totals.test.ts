// The market's running totals, kept by lua/clear.lua in the script that moves the money: after
// ordinary clears, a fee, a disputed report, a late clear that writes off, replays and a burst of
// concurrent clears, they equal the sums over accounts, offers and the write-off list.
import { describe, expect, test } from 'bun:test'
import { reapExpired } from '../../src/market/leases.ts'
import { marketTotals } from '../../src/market/totals.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import {
  admitFor,
  admitted,
  clearFor,
  freshMarketPerTest,
  type MarketFixture,
  postOffer,
  seedAccount,
} from '../helpers/market.ts'
import { untilRedisPasses } from '../helpers/wait.ts'

let fx: MarketFixture
freshMarketPerTest((fresh) => {
  fx = fresh
})

/** The same figures summed the slow way, over every account, offer and write-off. */
async function summed() {
  let spent = 0
  let earned = 0
  let fees = 0
  let disputed = 0
  for (const id of await fx.store.smembers(fx.keys.accounts)) {
    spent += Number(await fx.store.hget(fx.keys.account(id), 'spent'))
  }
  for (const id of await fx.store.smembers(fx.keys.offers)) {
    const [e, f, d] = await fx.store.hmget(fx.keys.offer(id), 'earned', 'fees', 'disputed')
    earned += Number(e ?? 0)
    fees += Number(f ?? 0)
    disputed += Number(d ?? 0)
  }
  const writtenOff = Object.values(await fx.store.hgetall(fx.keys.writeoffs)).reduce(
    (sum, v) => sum + Number(v),
    0,
  )
  const usdc = (n: number) => (n / 1e6).toFixed(6)
  return {
    object: 'market_totals' as const,
    spentUsdc: usdc(spent),
    earnedUsdc: usdc(earned),
    feesUsdc: usdc(fees),
    writtenOffUsdc: usdc(writtenOff),
    disputedBurnDiem: usdc(disputed),
  }
}

describe('market totals', () => {
  test('zero on an empty market', async () => {
    expect(await marketTotals(fx.store, fx.keys)).toEqual({
      object: 'market_totals',
      spentUsdc: '0.000000',
      earnedUsdc: '0.000000',
      feesUsdc: '0.000000',
      writtenOffUsdc: '0.000000',
      disputedBurnDiem: '0.000000',
    })
  })

  test('clears with a fee, a disputed report and a late clear that writes off; replays count once', async () => {
    await postOffer(fx, 50, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    const plain = admitted(await admitFor(fx, acct, { holdDiem: 2_000 as MicroDiem }))
    await clearFor(fx, plain.attemptId, 2_000, { feeBps: 250 })
    const disputed = admitted(await admitFor(fx, acct, { holdDiem: 1_000 as MicroDiem }))
    await clearFor(fx, disputed.attemptId, 3_000)
    // Replays change nothing, totals included.
    await clearFor(fx, plain.attemptId, 2_000, { feeBps: 250 })
    await clearFor(fx, disputed.attemptId, 3_000)

    const poor = await seedAccount(fx, 1_000)
    const late = admitted(await admitFor(fx, poor, { leaseMs: 50, holdDiem: 1_800 as MicroDiem }))
    await untilRedisPasses(fx.store, late.leaseDeadline)
    expect(await reapExpired(fx.store, fx.keys)).toBe(1)
    // Meanwhile the buyer spends 700 of its 1,000, so the late clear finds 300.
    const meanwhile = admitted(await admitFor(fx, poor, { holdDiem: 1_400 as MicroDiem }))
    await clearFor(fx, meanwhile.attemptId, 1_400)
    const result = await clearFor(fx, late.attemptId, 1_800, { feeBps: 1_000 })
    expect(result).toMatchObject({ cost: 900, charged: 300, writtenOff: 600 } as never)

    // 1,000 (fee 25) + 500 (2,000 disputed) + 700 + 300 (fee 30, 600 written off).
    expect(await marketTotals(fx.store, fx.keys)).toEqual({
      object: 'market_totals',
      spentUsdc: '0.002500',
      earnedUsdc: '0.002445',
      feesUsdc: '0.000055',
      writtenOffUsdc: '0.000600',
      disputedBurnDiem: '0.002000',
    })
    expect(await marketTotals(fx.store, fx.keys)).toEqual(await summed())
  })

  test("on one slot spend and fees are the offers' sums, whatever an earlier build left on the market hash", async () => {
    await postOffer(fx, 50, 5_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    // What an earlier build kept on the market hash for its clears: its offers hold the same.
    await fx.store.hset(fx.keys.market, 'spent', '999', 'fees', '99')
    const adm = admitted(await admitFor(fx, acct, { holdDiem: 2_000 as MicroDiem }))
    await clearFor(fx, adm.attemptId, 2_000, { feeBps: 250 })
    expect(await marketTotals(fx.store, fx.keys)).toMatchObject({
      spentUsdc: '0.001000',
      earnedUsdc: '0.000975',
      feesUsdc: '0.000025',
    })
    expect(await marketTotals(fx.store, fx.keys)).toEqual(await summed())
  })

  test('a burst of concurrent clears on many accounts: the totals are the sums', async () => {
    await postOffer(fx, 40, 500_000_000, { maxInFlight: 1_000 })
    await postOffer(fx, 55, 500_000_000, { maxInFlight: 1_000 })
    const accounts = await Promise.all(Array.from({ length: 8 }, () => seedAccount(fx, 50_000_000, 80)))
    const work = Array.from({ length: 200 }, async (_, i) => {
      const adm = admitted(
        await admitFor(fx, accounts[i % accounts.length]!, { holdDiem: (1_000 + i * 37) as MicroDiem }),
      )
      // Some report more than held (disputed), some less; every third pays a fee.
      await clearFor(fx, adm.attemptId, 900 + i * 41, { feeBps: i % 3 === 0 ? 500 : 0 })
    })
    await Promise.all(work)
    const totals = await marketTotals(fx.store, fx.keys)
    expect(Number(totals.spentUsdc)).toBeGreaterThan(0)
    expect(Number(totals.feesUsdc)).toBeGreaterThan(0)
    expect(Number(totals.disputedBurnDiem)).toBeGreaterThan(0)
    expect(totals).toEqual(await summed())
  })
})
