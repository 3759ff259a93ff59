// A late clear held apart: the replica's lease ran out (it stopped renewing for a while, then went
// on), the reaper reaped the account's hold and voided the reservation, and the result still came.
// The account is charged; the offer's side is its post. Should that post be lost (the replica dies
// with it queued, or the offer's slot refuses it for now), nothing but the reaper can make it: the
// reservation it voided must still be looked at again, or the buyer pays a supplier who never earns.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import type { Admission } from '../../src/market/admission.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { PostQueue } from '../../src/market/post-queue.ts'
import type { AdmitRefusal } from '../../src/market/refusal-errors.ts'
import { admitApart, clearApart, type Owners, ownerKeyspaces, reapOffer } from '../../src/market/two-phase.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { admitRequest, apartOfferRow, meteredClear, seedAccount } from '../helpers/market.ts'
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.ts'
import { until, untilRedisPasses } from '../helpers/wait.ts'

let cluster: RedisCluster
let store: Store
let owners: Owners
let prefix: string

beforeAll(async () => {
  cluster = await startRedisCluster()
  store = createStore(cluster.url, { name: 'svc-test-apart-late-post' })
  await store.whenReady(15_000)
  prefix = `t${randomBytes(4).toString('hex')}:{m}`
  owners = ownerKeyspaces(prefix)
})
afterEach(async () => {
  expect(await auditApart(store, prefix)).toEqual([])
})
afterAll(() => {
  store.close()
  cluster.stop()
})

async function seedOffer(): Promise<string> {
  const id = randomUUID()
  await store.hset(owners.offer(id).offer(id), {
    ...apartOfferRow(id, 50, 5_000_000, 100),
    supplierId: 'spl_late',
  })
  return id
}

async function seedBuyer() {
  const accountId = `acct_${randomBytes(12).toString('hex')}`
  const keys = owners.account(accountId)
  await seedAccount({ store, keys }, 1_000_000, 50, accountId)
  const digest = randomBytes(32).toString('hex')
  await store.hset(keys.accountKeys(accountId), 'key-1', digest)
  await store.hset(keyspace(prefix).apiKey(digest), { id: 'key-1', accountId })
  return { accountId, digest }
}

function admitted(result: Admission | AdmitRefusal): Admission {
  expect(result.code).toBe(AdmitCode.Admitted)
  return result as Admission
}

const offer = (offerId: string) => store.hgetall(owners.offer(offerId).offer(offerId))
const reservation = (offerId: string, attemptId: string) =>
  store.hgetall(owners.offer(offerId).reservation(attemptId))
const account = (accountId: string) => store.hgetall(owners.account(accountId).account(accountId))
/** How long the reaper looks again at a reservation it voided, here. */
const WATCH_MS = 50
const redisNow = async () => {
  const [seconds, micros] = await store.time()
  return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000)
}
/** A replica's queue that never sends: the replica is gone before its timer fires. */
const gone = () => new PostQueue(store, (offerId) => owners.offer(offerId).base, 600_000)

describe('a late clear whose reservation the reaper voided', () => {
  test('its post lost with its replica: the reaper looks again and posts it, once', async () => {
    const offerId = await seedOffer()
    const buyer = await seedBuyer()
    const a = admitted(
      await admitApart(store, owners, {
        ...admitRequest(buyer.accountId),
        apiKeyDigest: buyer.digest,
        offerId,
        maxCents: 50,
        holdDiem: 1_000 as MicroDiem,
        leaseMs: 20,
      }),
    )
    // The replica stops renewing; the reaper reaps the hold and voids the reservation.
    await untilRedisPasses(store, a.leaseDeadline)
    await until(async () => (await reapOffer(store, owners, offerId, 100, 60_000, WATCH_MS)) > 0)
    expect(await reservation(offerId, a.attemptId)).toMatchObject({ state: 'voided' })
    expect(await offer(offerId)).toMatchObject({ held: '0', inflight: '0' })

    // The replica goes on: its result comes, the account is charged (a late clear), its post queued,
    // and the replica dies before the queue is sent.
    const who = { accountId: buyer.accountId, offerId, model: 'llama-3.3-70b' }
    const cleared = await clearApart(store, owners, who, meteredClear(a.attemptId, 600), gone())
    expect(cleared.charged).toBe(300 as never)
    expect((await account(buyer.accountId)).spent).toBe('300')

    // Past the reaper's look again (50 ms after its void), its next pass posts it from the
    // account's side, once.
    await untilRedisPasses(store, (await redisNow()) + WATCH_MS)
    expect(await reapOffer(store, owners, offerId, 100, 60_000, WATCH_MS)).toBe(1)
    expect(await reservation(offerId, a.attemptId)).toMatchObject({ state: 'posted', burnDiem: '600' })
    expect(await reapOffer(store, owners, offerId, 100, 60_000, WATCH_MS)).toBe(0)
    expect(await offer(offerId)).toMatchObject({ held: '0', inflight: '0', burned: '600', earned: '300' })
    // Nothing left for the reaper: the offer's leases are empty.
    expect(await store.zcard(owners.offer(offerId).leases)).toBe(0)
  })

  test('no late result: the reservation it voided is looked at once more, then let go', async () => {
    const offerId = await seedOffer()
    const buyer = await seedBuyer()
    const a = admitted(
      await admitApart(store, owners, {
        ...admitRequest(buyer.accountId),
        apiKeyDigest: buyer.digest,
        offerId,
        maxCents: 50,
        holdDiem: 1_000 as MicroDiem,
        leaseMs: 20,
      }),
    )
    await untilRedisPasses(store, a.leaseDeadline)
    await until(async () => (await reapOffer(store, owners, offerId, 100, 60_000, WATCH_MS)) > 0)
    await untilRedisPasses(store, (await redisNow()) + WATCH_MS)
    expect(await reapOffer(store, owners, offerId, 100, 60_000, WATCH_MS)).toBe(1)
    expect(await store.zcard(owners.offer(offerId).leases)).toBe(0)
    expect(await reservation(offerId, a.attemptId)).toMatchObject({ state: 'voided' })
    expect(await offer(offerId)).toMatchObject({ held: '0', inflight: '0', burned: '0', earned: '0' })
    expect(await account(buyer.accountId)).toMatchObject({ held: '0', spent: '0', confirmed: '1000000' })
  })
  test('a voided reservation kept a shorter time than the watch: let go once it expires', async () => {
    const offerId = await seedOffer()
    const buyer = await seedBuyer()
    const a = admitted(
      await admitApart(store, owners, {
        ...admitRequest(buyer.accountId),
        apiKeyDigest: buyer.digest,
        offerId,
        maxCents: 50,
        holdDiem: 1_000 as MicroDiem,
        leaseMs: 20,
      }),
    )
    await untilRedisPasses(store, a.leaseDeadline)
    // Kept 20 ms once voided; watched 50.
    await until(async () => (await reapOffer(store, owners, offerId, 100, 20, WATCH_MS)) > 0)
    await until(async () => (await store.exists(owners.offer(offerId).reservation(a.attemptId))) === 0)
    await untilRedisPasses(store, (await redisNow()) + WATCH_MS)
    expect(await reapOffer(store, owners, offerId, 100, 20, WATCH_MS)).toBe(1)
    expect(await store.zcard(owners.offer(offerId).leases)).toBe(0)
  })
})
