// Attempts admitted by a gateway from before the packed record (a field per value, its lease in
// the earlier zset, as a rolling deploy leaves them open for a while): this build's scripts clear,
// replay, release and reap them in that shape with the same money as a packed one, and the lookup
// and the audit read both. A packed attempt's lease is never where such a gateway reaps.
import { expect, test } from 'bun:test'
import { auditMarket } from '../../src/market/audit.ts'
import { release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import { attemptIdOf } from '../../src/records/attempt-id.ts'
import { lookupRequest } from '../../src/records/lookup.ts'
import { newSupportReference } from '../../src/records/support-reference.ts'
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
import { untilRedisPasses } from '../helpers/wait.ts'

let fx: MarketFixture
freshMarketPerTest((fresh) => {
  fx = fresh
})

const HOUR = 3_600_000

/**
 * Rewrites an admitted attempt as an older gateway wrote it: a field per value, nothing packed,
 * its lease in the zset that gateway reaps.
 */
async function asEarlier(attemptId: string): Promise<Record<string, string>> {
  const key = fx.keys.attempt(attemptId)
  const fields = await attemptRecord(fx.store, key)
  expect(fields.state).toBe('admitted')
  await fx.store.del(key)
  await fx.store.hset(key, fields)
  expect(await fx.store.hget(key, 'a')).toBeNull()
  const deadline = await fx.store.zscore(fx.keys.leases, attemptId)
  expect(deadline).not.toBeNull()
  expect(await fx.store.zscore(fx.keys.earlierLeases, attemptId)).toBeNull()
  await fx.store.call('ZREM', fx.keys.leases, attemptId)
  await fx.store.zadd(fx.keys.earlierLeases, deadline!, attemptId)
  return fields
}

/** Both lease zsets, as the audit reads them. */
const leases = async () => [
  await fx.store.zrange(fx.keys.leases, 0, -1),
  await fx.store.zrange(fx.keys.earlierLeases, 0, -1),
]

const money = async (accountId: string) =>
  fx.store.hmget(fx.keys.account(accountId), 'confirmed', 'held', 'spent', 'inflight')

test('cleared in its own shape, charged as a packed one, replayed as a no-op, read by the lookup', async () => {
  await postOffer(fx, 45, 50_000_000)
  const packedBuyer = await seedAccount(fx, 1_000_000)
  const earlierBuyer = await seedAccount(fx, 1_000_000)
  const reference = newSupportReference()
  const packed = admitted(await admitFor(fx, packedBuyer))
  const earlier = admitted(await admitFor(fx, earlierBuyer, { attemptId: attemptIdOf(reference, 1) }))
  const admittedFields = await asEarlier(earlier.attemptId)

  const extra = { feeBps: 250, estimated: true, recordRetentionMs: HOUR }
  const a = await clearFor(fx, packed.attemptId, 3_333, extra)
  const b = await clearFor(fx, earlier.attemptId, 3_333, extra)
  expect(b).toEqual(a)
  expect(await money(earlierBuyer)).toEqual(await money(packedBuyer))
  expect(await leases()).toEqual([[], []])
  expect(await clearFor(fx, earlier.attemptId, 3_333, extra)).toEqual({ ...b, replay: true })

  const key = fx.keys.attempt(earlier.attemptId)
  expect(await fx.store.hget(key, 'a')).toBeNull()
  const stored = await fx.store.hgetall(key)
  expect(stored).toEqual({
    ...admittedFields,
    state: 'cleared',
    // The hold's 1,000 billed, the rest disputed.
    burn: '1000',
    cost: '450',
    costUsdc: '450',
    disputed: '2333',
    fee: '11',
    inputTokens: '10',
    outputTokens: '20',
    outcome: 'completed',
    estimated: '1',
    endedAt: expect.any(String),
  })
  // The same record as the packed attempt's, ids and times aside.
  const { id: _a, endedAt: _b, admittedAt: _c, accountId: _d, requestId: _e, ...same } = stored
  expect(await attemptRecord(fx.store, fx.keys.attempt(packed.attemptId))).toMatchObject(same)
  expect(await fx.store.pttl(key)).toBeGreaterThan(HOUR - 60_000)

  const view = await lookupRequest(fx.store, fx.keys, earlierBuyer, reference)
  expect(view).toMatchObject({ status: 'completed', attempts: [expect.objectContaining({ attempt: 1 })] })
  expect(await auditMarket(fx.store, fx.keys)).toEqual([])
})

test('released and reaped in its own shape: everything held goes back, once', async () => {
  await postOffer(fx, 50, 50_000_000)
  const buyer = await seedAccount(fx, 1_000_000)
  const before = await money(buyer)
  // The long lease first: an admit reaps expired leases, so none may follow the short one.
  const failed = admitted(await admitFor(fx, buyer))
  const expiring = admitted(await admitFor(fx, buyer, { leaseMs: 20 }))
  await asEarlier(failed.attemptId)
  await asEarlier(expiring.attemptId)
  // Open in the old shape: the audit counts their holds.
  expect(await auditMarket(fx.store, fx.keys)).toEqual([])

  const released = () =>
    release(fx.store, fx.keys, {
      attemptId: failed.attemptId,
      errorCode: 'upstream_503',
      cooldownMs: 0,
      upstreamBalance: null,
      final: true,
      recordRetentionMs: HOUR,
    })
  expect(await released()).toBe(true)
  expect(await released()).toBe(false)
  await untilRedisPasses(fx.store, expiring.leaseDeadline)
  expect(await reapExpired(fx.store, fx.keys, 100, HOUR)).toBe(1)
  expect(await reapExpired(fx.store, fx.keys, 100, HOUR)).toBe(0)

  expect(await money(buyer)).toEqual(before)
  expect(await leases()).toEqual([[], []])
  expect(await fx.store.hmget(fx.keys.attempt(failed.attemptId), 'a', 'state', 'errorCode', 'final')).toEqual(
    [null, 'released', 'upstream_503', '1'],
  )
  expect(await fx.store.hmget(fx.keys.attempt(expiring.attemptId), 'a', 'state')).toEqual([null, 'reaped'])
  expect(await auditMarket(fx.store, fx.keys)).toEqual([])
})
