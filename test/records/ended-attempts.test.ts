// The ended-attempt Streams, on a real Redis: every script that ends an attempt (clear, release,
// reap, refuse) appends it, once, to its account's Stream and to the market's, in the same call.
import { describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import { fieldsOf } from '../../src/records/activity.ts'
import { recordRefusal } from '../../src/records/refusals.ts'
import { attemptRecord } from '../helpers/attempts.ts'
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

type Entry = [string, string[]]
const rows = async (key: string) =>
  ((await fx.store.xrange(key, '-', '+')) as Entry[]).map(([, flat]) => fieldsOf(flat))

describe('the ended-attempt Streams', () => {
  test('clear, release, reap and refuse each append the attempt once to both Streams', async () => {
    const offer = await postOffer(fx, 50, 1_000_000_000)
    const acct = await seedAccount(fx, 1_000_000)
    const served = admitted(await admitFor(fx, acct, { model: 'm-1' }))
    const failed = admitted(await admitFor(fx, acct))
    const expired = admitted(await admitFor(fx, acct))
    await clearFor(fx, served.attemptId, 700, { inputTokens: 11, outputTokens: 22 })
    await clearFor(fx, served.attemptId, 700) // a replay: nothing new
    const releaseFailed = () =>
      release(fx.store, fx.keys, {
        attemptId: failed.attemptId,
        errorCode: 'upstream_5xx',
        cooldownMs: 0,
        upstreamBalance: null,
      })
    await releaseFailed()
    await releaseFailed()
    // Its replica stopped renewing: the lease deadline is in the past.
    await fx.store.zadd(fx.keys.leases, 1, expired.attemptId)
    await reapExpired(fx.store, fx.keys, 10)
    const refusedId = `sr_${randomUUID()}.1`
    await recordRefusal(
      fx.store,
      fx.keys,
      {
        attemptId: refusedId,
        accountId: acct,
        apiKeyId: 'key-1',
        requestId: 'req_1',
        model: 'm-2',
        errorCode: 'key_limit_exceeded',
      },
      60_000,
    )

    const account = await rows(fx.keys.accountActivity(acct))
    expect(account).toEqual(await rows(fx.keys.endedAttempts))
    expect(account).toEqual([
      {
        attempt: served.attemptId,
        account: acct,
        key: 'key-1',
        model: 'm-1',
        status: 'completed',
        costUsdc: '350',
        askCents: '50',
        inputTokens: '11',
        outputTokens: '22',
        offer,
        errorCode: '',
      },
      expect.objectContaining({
        attempt: failed.attemptId,
        status: 'failed',
        costUsdc: '0',
        errorCode: 'upstream_5xx',
      }),
      expect.objectContaining({ attempt: expired.attemptId, status: 'expired', costUsdc: '0' }),
      expect.objectContaining({
        attempt: refusedId,
        status: 'refused',
        model: 'm-2',
        costUsdc: '0',
        askCents: '',
        offer: '',
        errorCode: 'key_limit_exceeded',
      }),
    ])
    // The refusal is also its request's record, kept for the retention given.
    expect((await attemptRecord(fx.store, fx.keys.attempt(refusedId))).state).toBe('refused')
    expect(await fx.store.pttl(fx.keys.attempt(refusedId))).toBeGreaterThan(0)
  })

  test("an account's Stream holds only its own attempts; the market's holds everyone's", async () => {
    await postOffer(fx, 50, 1_000_000_000)
    const a = await seedAccount(fx, 1_000_000)
    const b = await seedAccount(fx, 1_000_000)
    for (const acct of [a, b, a]) await clearFor(fx, admitted(await admitFor(fx, acct)).attemptId, 100)
    expect((await rows(fx.keys.accountActivity(a))).map((r) => r.account)).toEqual([a, a])
    expect((await rows(fx.keys.accountActivity(b))).map((r) => r.account)).toEqual([b])
    expect((await rows(fx.keys.endedAttempts)).map((r) => r.account)).toEqual([a, b, a])
  })
})
