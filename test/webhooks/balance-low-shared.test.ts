// Two endpoints of one account at the same balance threshold: one crossing is one balance.low
// event, which each of them is sent once.
import { expect, test } from 'bun:test'
import { eventOf, wants } from '../../src/webhooks/delivery.ts'
import type { StoredEndpoint } from '../../src/webhooks/endpoints.ts'
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

test('one crossing of a threshold two endpoints share is one event per endpoint', async () => {
  await postOffer(fx, 50, 1_000_000_000, { maxInFlight: 100_000 })
  const acct = await seedAccount(fx, 1_000_000_000)
  const confirmed = Number(await fx.store.hget(fx.keys.account(acct), 'confirmed'))
  const threshold = confirmed - 100 // crossed by the first 500 micro-USDC charge
  const owner = `acct:${acct}` as const
  const endpoints: StoredEndpoint[] = ['wh_a', 'wh_b'].map((id) => ({
    id,
    url: 'https://example.com/',
    events: ['balance.low'],
    threshold,
    sealedSecret: '',
    createdAt: 0,
  }))
  for (const e of endpoints) {
    await fx.store.hset(fx.keys.webhooks(owner), e.id, JSON.stringify(e))
    await fx.store.hset(fx.keys.webhookHooks(owner), `low:${e.id}`, threshold)
  }
  await fx.store.hset(fx.keys.webhookHooks(owner), 't:balance.low', 2)
  await fx.store.hset(fx.keys.account(acct), 'hooks', 2)

  await clearFor(fx, admitted(await admitFor(fx, acct)).attemptId, 1_000)
  const events = (await fx.store.xrange(fx.keys.webhookEvents(owner), '-', '+')).map(([id, f]) =>
    eventOf(owner, id, f),
  )
  for (const e of endpoints) expect(events.filter((event) => wants(e, event))).toHaveLength(1)
})
