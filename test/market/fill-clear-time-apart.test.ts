// Held apart, a clear's fill is written by its post on the offer's slot, which may come later than
// the clear: carried on the offer's next reservation, or posted by the reaper once the replica that
// cleared is gone. The fill counts at its clear's time: a request cleared at 23:59:59.900 UTC and
// posted after midnight is the earnings (and the served count) of the day it was cleared on.
// Runs on one server or, with TEST_REDIS_TOPOLOGY=cluster, on a real Cluster (the account's and
// the offer's sides on their own slots).
import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import { auditApart } from '../../src/market/audit-apart.ts'
import { clear } from '../../src/market/clearing.ts'
import { PostQueue } from '../../src/market/post-queue.ts'
import { admitApart, clearApart, ownerKeyspaces, reapOffer } from '../../src/market/two-phase.ts'
import { utcDay } from '../../src/records/days.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { supplierEarnings } from '../../src/suppliers/earnings.ts'
import { listFills } from '../../src/suppliers/fills.ts'
import { attemptRecord, setAttemptValue } from '../helpers/attempts.ts'
import { admitRequest, apartOfferRow, meteredClear, seedAccount } from '../helpers/market.ts'
import { testRedisUrl } from '../helpers/stack.ts'
import { untilRedisPasses } from '../helpers/wait.ts'

const DAY = 86_400_000
const MODEL = 'llama-3.3-70b'
let store: Store
const markets: string[] = []

beforeAll(async () => {
  store = createStore(testRedisUrl(), { name: 'svc-test-fill-clear-time' })
  await store.whenReady(15_000)
})
afterEach(async () => {
  for (const prefix of markets.splice(0)) expect(await auditApart(store, prefix)).toEqual([])
})
afterAll(() => store.close())

/** A market held apart: a supplier's offer on its own slot, a buyer on its shard. */
async function market() {
  const prefix = `t${randomBytes(4).toString('hex')}:{f}`
  markets.push(prefix)
  const keys = keyspace(prefix, 'apart')
  const owners = ownerKeyspaces(prefix)
  const supplierId = `spl_${randomBytes(8).toString('hex')}`
  const offerId = randomUUID()
  await store.hset(owners.offer(offerId).offer(offerId), {
    ...apartOfferRow(offerId, 50, 5_000_000, 1_000),
    supplierId,
  })
  await store.sadd(keys.supplierOffers(supplierId), offerId)
  const accountId = `acct_${randomBytes(12).toString('hex')}`
  await seedAccount({ store, keys: owners.account(accountId) }, 10_000_000, 50, accountId)
  const who = { accountId, offerId, model: MODEL }
  const admit = (leaseMs = 60_000) =>
    admitApart(store, owners, { ...admitRequest(accountId, { leaseMs }), offerId, maxCents: 50 })
  const redisNow = async () => {
    const [s, us] = await store.time()
    return Number(s) * 1000 + Math.floor(Number(us) / 1000)
  }
  /** Yesterday's last 100 ms, as Redis's clock reads now: a clear then, posted today. */
  const beforeMidnight = async () => Math.floor((await redisNow()) / DAY) * DAY - 100
  const served = async (ms: number) =>
    Number((await store.hget(owners.offer(offerId).statsDay(utcDay(ms)), MODEL)) ?? 0)
  const earned = async (ms: number) =>
    (await supplierEarnings(store, keys, supplierId, '7d')).days.find((d) => d.date === utcDay(ms))!
  return {
    keys,
    owners,
    supplierId,
    offerId,
    accountId,
    who,
    admit,
    redisNow,
    beforeMidnight,
    served,
    earned,
  }
}

test("a queued post carries its clear's time; posted after midnight, the fill counts on the clear's day", async () => {
  const m = await market()
  const posts = new PostQueue(store, (offerId) => m.owners.offer(offerId).base, 600_000)
  const a = await m.admit()
  if (!('attemptId' in a)) throw new Error(`not admitted: ${JSON.stringify(a)}`)
  const clearing = await clearApart(store, m.owners, m.who, meteredClear(a.attemptId, 600), posts)
  const record = await attemptRecord(store, m.owners.account(m.accountId).attempt(a.attemptId))
  // The post waiting in the queue says when its clear was: the request's record's end.
  const carried = posts.take(m.offerId)!
  expect(carried.values).toHaveLength(11)
  expect(String(carried.values[10])).toBe(record.endedAt!)

  // Delivered after midnight, for a clear just before it.
  const cleared = await m.beforeMidnight()
  carried.values[10] = cleared
  const codes = await runScript(
    store,
    'post',
    [m.owners.offer(m.offerId).base],
    {
      recordRetentionMs: 30 * DAY,
      offerId: m.offerId,
    },
    carried.values,
  )
  expect(codes).toEqual([1])
  const earnedUsdc = (clearing.charged - clearing.fee) / 1e6
  expect(await m.earned(cleared)).toEqual({
    date: utcDay(cleared),
    earnedUsdc: earnedUsdc.toFixed(6),
    burnDiem: (clearing.burn / 1e6).toFixed(6),
    fills: 1,
  })
  expect((await m.earned(cleared + DAY)).fills).toBe(0)
  expect((await supplierEarnings(store, m.keys, m.supplierId, '24h')).fills).toBe(0)
  expect(await m.served(cleared)).toBe(1)
  expect(await m.served(cleared + DAY)).toBe(0)
  const listed = await listFills(store, m.keys, m.supplierId, 10, null)
  expect(listed.data.map((f) => f.createdAt)).toEqual([new Date(cleared).toISOString()])
})

test("the reaper posts a clear its replica left: at the clear's time, from the account's record", async () => {
  const m = await market()
  const a = await m.admit(20)
  if (!('attemptId' in a)) throw new Error(`not admitted: ${JSON.stringify(a)}`)
  // The replica is gone after the clear's first step: charged, never posted.
  const clearing = await clear(store, m.owners.account(m.accountId), {
    ...meteredClear(a.attemptId, 600),
    offerApart: true,
  })
  // The clear as its record tells it, just before midnight (the reaper comes after it).
  const cleared = await m.beforeMidnight()
  await setAttemptValue(store, m.owners.account(m.accountId).attempt(a.attemptId), 'endedAt', String(cleared))
  await untilRedisPasses(store, a.leaseDeadline + 50)
  expect(await reapOffer(store, m.owners, m.offerId)).toBe(1)
  expect(await m.earned(cleared)).toMatchObject({
    earnedUsdc: ((clearing.charged - clearing.fee) / 1e6).toFixed(6),
    fills: 1,
  })
  expect((await m.earned(cleared + DAY)).fills).toBe(0)
  expect(await m.served(cleared)).toBe(1)
})

test('a fill posted in the hour of its clear is written as before, with no time of its own', async () => {
  const m = await market()
  const a = await m.admit()
  if (!('attemptId' in a)) throw new Error(`not admitted: ${JSON.stringify(a)}`)
  await clearApart(store, m.owners, m.who, meteredClear(a.attemptId, 600))
  const entries = (await store.xrange(m.keys.offerFills(m.offerId, m.supplierId), '-', '+')) as [
    string,
    string[],
  ][]
  expect(entries).toHaveLength(1)
  expect(entries[0]![1]).not.toContain('clearedAt')
  const now = await m.redisNow()
  expect((await m.earned(now)).fills).toBe(1)
})

test("a clear sent again (the clear journal) posts at the first clear's time, from its record", async () => {
  const m = await market()
  const a = await m.admit()
  if (!('attemptId' in a)) throw new Error(`not admitted: ${JSON.stringify(a)}`)
  // The first clear charged the account; its post was lost with its replica's queue.
  const first = await clear(store, m.owners.account(m.accountId), {
    ...meteredClear(a.attemptId, 600),
    offerApart: true,
  })
  const cleared = await m.beforeMidnight()
  await setAttemptValue(store, m.owners.account(m.accountId).attempt(a.attemptId), 'endedAt', String(cleared))
  const again = await clearApart(store, m.owners, m.who, meteredClear(a.attemptId, 600))
  expect(again.replay).toBe(true)
  expect(again.clearedAt).toBe(cleared)
  expect(await m.earned(cleared)).toMatchObject({
    earnedUsdc: ((first.charged - first.fee) / 1e6).toFixed(6),
    fills: 1,
  })
  expect((await m.earned(cleared + DAY)).fills).toBe(0)
  expect(await m.served(cleared)).toBe(1)
  const listed = await listFills(store, m.keys, m.supplierId, 10, null)
  expect(listed.data.map((f) => f.createdAt)).toEqual([new Date(cleared).toISOString()])
})
