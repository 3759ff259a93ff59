// A clear that writes a lost admission admits it now, in the key's current period: a period that
// ended is rolled on first (as admit rolls it), so the charge counts where it falls and the key
// never spends past its limit in the period it was charged in.
import { expect, test } from 'bun:test'
import { periodStart } from '../../src/accounts/budget-periods.ts'
import { marketSteps } from '../../src/market/steps.ts'
import {
  admitFor,
  admitted,
  clearFor,
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

test('a lost admission cleared today counts in today, not in a day that has ended', async () => {
  await postOffer(fx, 50, 5_000_000_000, { maxInFlight: 100_000 })
  const acct = await seedAccount(fx, 1_000_000_000)
  await fx.store.hset(fx.keys.account(acct), 'limit:key-1', 2500, 'reset:key-1', 'daily')
  const before = await saveKeys(fx.store, fx.keys.prefix)
  const lost = admitted(await admitFor(fx, acct))
  await before.restore()
  // The key last counted yesterday: 2,000 of its 2,500 then.
  const [sec] = await fx.store.time()
  const yesterday = periodStart('daily', Number(sec) * 1000) - 86_400_000
  await fx.store.hset(fx.keys.account(acct), 'pstart:key-1', yesterday, 'pspent:key-1', 2000)
  const { attemptId: _, ...rest } = meteredClear('', 1_000)
  const cleared = await marketSteps(fx.store, fx.keys).clear(lost, rest)
  expect(cleared).toMatchObject({ charged: 500, admissionLost: true })
  // Today: 500 charged already, so 2,000 more (four requests of 500) and no more.
  let admittedToday = 0
  for (let i = 0; i < 6; i++) {
    const a = await admitFor(fx, acct)
    if (a.code !== 1) break
    admittedToday++
    await clearFor(fx, (a as { attemptId: string }).attemptId, 1_000)
  }
  expect(admittedToday).toBe(4)
})
