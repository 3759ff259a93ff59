// Property test: any sequence of admits, clears, releases, renewals, reaps and offer changes, run
// against a real Redis, keeps every invariant the audit checks.
import { afterAll, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { Admission } from '../../src/market/admission.ts'
import { auditMarket } from '../../src/market/audit.ts'
import { clear, release } from '../../src/market/clearing.ts'
import { reapExpired, renewLease } from '../../src/market/leases.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { admitFor, type MarketFixture, marketFixture, postOffer, seedAccount } from '../helpers/market.ts'

const fixtures: MarketFixture[] = []
afterAll(() => {
  for (const f of fixtures) f.close()
})

/**
 * Every ended attempt is kept as its request's record, for the retention, and an open one never
 * expires; the day's usage stats count each cleared attempt exactly once (a replayed clear or a
 * late clear after a reap counts no more).
 */
async function expectEachEndRecordedOnce(fx: MarketFixture, admitted: Admission[]) {
  let cleared = 0
  for (const { attemptId } of admitted) {
    const key = fx.keys.attempt(attemptId)
    const { state } = await attemptRecord(fx.store, key)
    const ttl = await fx.store.pttl(key)
    if (state === 'admitted') expect(ttl).toBe(-1)
    else expect(ttl).toBeGreaterThan(29 * 86_400_000)
    if (state === 'cleared') cleared++
  }
  // Today's bucket and yesterday's, should the run have crossed midnight UTC.
  const [seconds] = await fx.store.time()
  let served = 0
  for (const ms of [Number(seconds) * 1000, Number(seconds) * 1000 - 86_400_000]) {
    const day = new Date(ms).toISOString().slice(0, 10)
    served += Number((await fx.store.hget(fx.keys.statsDay(day), 'llama-3.3-70b')) ?? 0)
  }
  expect(served).toBe(cleared)
}

const op = fc.oneof(
  fc.record({
    kind: fc.constant('admit' as const),
    account: fc.nat(2),
    key: fc.nat(2),
    estimate: fc.integer({ min: 1, max: 40_000 }),
    leaseMs: fc.constantFrom(5, 60_000),
  }),
  fc.record({
    kind: fc.constant('clear' as const),
    pick: fc.nat(),
    burn: fc.integer({ min: 0, max: 60_000 }),
    feeBps: fc.constantFrom(0, 100, 10_000),
    twice: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('release' as const), pick: fc.nat(), cool: fc.boolean() }),
  fc.record({ kind: fc.constant('renew' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('reap' as const), waitMs: fc.constantFrom(0, 10) }),
  fc.record({
    kind: fc.constant('offer' as const),
    pick: fc.nat(),
    capacity: fc.integer({ min: 0, max: 200_000 }),
    pause: fc.boolean(),
  }),
)

test('random market sequences keep every invariant', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 5, maxLength: 40 }), async (ops) => {
      const fx = marketFixture()
      fixtures.push(fx)
      const accounts = [
        await seedAccount(fx, 5_000),
        await seedAccount(fx, 50_000),
        await seedAccount(fx, 2_000_000, 80),
      ]
      const offers = [
        await postOffer(fx, 30, 60_000, { maxInFlight: 2 }),
        await postOffer(fx, 50, 300_000),
        await postOffer(fx, 75, 100_000),
      ]
      const open: Admission[] = []
      for (const o of ops) {
        const chosen = 'pick' in o && open.length > 0 ? open[o.pick % open.length]! : undefined
        switch (o.kind) {
          case 'admit': {
            const r = await admitFor(fx, accounts[o.account]!, {
              apiKeyId: `k${o.key}`,
              keyCap: 3,
              accountCap: 4,
              holdDiem: o.estimate as MicroDiem,
              leaseMs: o.leaseMs,
            })
            if (r.code === AdmitCode.Admitted) open.push(r)
            break
          }
          case 'clear':
            if (!chosen) break
            for (let i = 0; i < (o.twice ? 2 : 1); i++) {
              await clear(fx.store, fx.keys, {
                attemptId: chosen.attemptId,
                burn: o.burn as MicroDiem,
                feeBps: o.feeBps,
                upstreamBalanceAfter: null,
                inputTokens: 1,
                outputTokens: 1,
                estimated: false,
                outcome: 'completed',
              }).catch((e: Error) => expect(e.message).toContain('released'))
            }
            break
          case 'release':
            if (chosen) {
              await release(fx.store, fx.keys, {
                attemptId: chosen.attemptId,
                errorCode: 'test',
                cooldownMs: o.cool ? 5 : 0,
                upstreamBalance: null,
              })
            }
            break
          case 'renew':
            if (chosen) await renewLease(fx.store, fx.keys, chosen.attemptId, 60_000)
            break
          case 'reap':
            if (o.waitMs) await Bun.sleep(o.waitMs)
            await reapExpired(fx.store, fx.keys)
            break
          case 'offer': {
            const id = offers[o.pick % offers.length]!
            await fx.offers
              .update(id, { capacity: o.capacity as MicroDiem, status: o.pause ? 'paused' : 'active' })
              .catch((e: Error) => expect(e.message).toContain('capacity cannot go below'))
            break
          }
        }
      }
      expect(await auditMarket(fx.store, fx.keys)).toEqual([])
      await expectEachEndRecordedOnce(fx, open)
    }),
    { numRuns: 60 },
  )
}, 60_000)
