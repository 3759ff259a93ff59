// An offer's upstream balance is what its current key reported. The operator's PATCH of the key
// forgets the old key's balance, and a request admitted on the old key and still in flight does
// not write it back when it ends after the PATCH (cleared, or released on a 402): the new key is
// routed to on what it reports itself. One slot and held apart, through MarketSteps on the run's
// Redis (a Cluster with TEST_REDIS_TOPOLOGY=cluster).
import { afterAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { AccountStore } from '../../src/accounts/accounts.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { OfferService } from '../../src/market/offers.ts'
import { marketSteps } from '../../src/market/steps.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { createStore } from '../../src/redis/store.ts'
import { admitRequest, admitted, meteredClear } from '../helpers/market.ts'
import { testRedisUrl } from '../helpers/stack.ts'

const store = createStore(testRedisUrl(), { name: 'svc-test-upstream-key-change' })
afterAll(() => store.close())

const HOLD = 1_000 as MicroDiem

async function market(layout: 'one slot' | 'apart') {
  const prefix = `k${randomBytes(4).toString('hex')}:{m}`
  const keys = layout === 'apart' ? keyspace(prefix, 'apart') : keyspace(prefix)
  const offers = new OfferService(store, keys, randomBytes(32))
  const offer = await offers.create({
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamApiKey: 'the-old-key',
    askCents: 40,
    capacity: 5_000_000 as MicroDiem,
  })
  const accounts = new AccountStore(store, keys)
  const { account } = await accounts.create(`0x${randomBytes(20).toString('hex')}`, 80)
  await accounts.credit(account.id, '1.000000', 'test funds', 'test')
  const [apiKeyId] = await store.hkeys(keys.accountKeys(account.id))
  const request = () =>
    admitRequest(account.id, { apiKeyId: apiKeyId!, holdDiem: HOLD, defaultMaxPriceCents: 80 })
  return { keys, offers, offerId: offer.id, request }
}

for (const layout of ['one slot', 'apart'] as const) {
  test(`${layout}: a request in flight on the old key when the operator changes it records none of its balance`, async () => {
    const m = await market(layout)
    let steps = marketSteps(store, m.keys)
    const cleared = admitted(await steps.admit(m.request()))
    const refused = admitted(await steps.admit(m.request()))
    expect([cleared.offerId, refused.offerId]).toEqual([m.offerId, m.offerId])
    // The operator puts another key in the old one's place while both are in flight on it.
    expect(
      (await m.offers.update(m.offerId, { upstreamApiKey: 'the-new-key' })).upstreamBalanceDiem,
    ).toBeNull()
    // The old key's answers come after: nearly drained, then a 402.
    const { attemptId: _, ...clearArgs } = meteredClear(cleared.attemptId, 400, {
      upstreamBalanceAfter: 5 as MicroDiem,
    })
    expect((await steps.clear(cleared, clearArgs)).charged).toBeGreaterThan(0)
    expect(
      await steps.release(refused, {
        errorCode: 'upstream_out_of_balance',
        cooldownMs: 0,
        upstreamBalance: 0 as MicroDiem,
        final: true,
      }),
    ).toBe(true)
    // Held apart, the offer's side is posted from the queue: all of it before close resolves.
    await steps.close()
    const offer = await m.offers.get(m.offerId)
    expect(offer).toMatchObject({ upstreamBalanceDiem: null, heldDiem: '0.000000', inFlight: 0 })
    // The new key is routed to, and what it reports is its balance.
    steps = marketSteps(store, m.keys)
    const next = admitted(await steps.admit(m.request()))
    expect(next).toMatchObject({ offerId: m.offerId, upstreamBalance: null })
    const { attemptId: __, ...nextArgs } = meteredClear(next.attemptId, 400, {
      upstreamBalanceAfter: 3_000_000 as MicroDiem,
    })
    await steps.clear(next, nextArgs)
    await steps.close()
    expect((await m.offers.get(m.offerId))?.upstreamBalanceDiem).toBe('3.000000')
    if (layout === 'apart') expect(await auditApart(store, m.keys.prefix)).toEqual([])
  })
}

for (const layout of ['one slot', 'apart'] as const) {
  test(`${layout}: a request on the old key that ends after one on the new key leaves the new key's balance`, async () => {
    const m = await market(layout)
    const steps = marketSteps(store, m.keys)
    const old = admitted(await steps.admit(m.request()))
    await m.offers.update(m.offerId, { upstreamApiKey: 'the-new-key' })
    const fresh = admitted(await steps.admit(m.request()))
    expect([old.offerId, fresh.offerId]).toEqual([m.offerId, m.offerId])
    // The new key answers first; the old key's long request ends after it. Held apart, both posts
    // wait in the replica's queue and reach the offer together.
    const { attemptId: _, ...freshArgs } = meteredClear(fresh.attemptId, 400, {
      upstreamBalanceAfter: 3_000_000 as MicroDiem,
    })
    await steps.clear(fresh, freshArgs)
    const { attemptId: __, ...oldArgs } = meteredClear(old.attemptId, 400, {
      upstreamBalanceAfter: 5 as MicroDiem,
    })
    await steps.clear(old, oldArgs)
    await steps.close()
    expect(await m.offers.get(m.offerId)).toMatchObject({
      upstreamBalanceDiem: '3.000000',
      heldDiem: '0.000000',
      inFlight: 0,
    })
    if (layout === 'apart') expect(await auditApart(store, m.keys.prefix)).toEqual([])
  })
}
