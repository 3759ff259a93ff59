// A reservation whose reply was lost, held apart on a real three-master Cluster: the request is
// reserved and held on the next offer under the same attempt id, so the first offer's reservation
// is a stray. Its reaper voids it, never posting the clear again (the supplier paid twice) nor
// reaping the hold the next offer's live request holds. And a late clear held apart, whose capacity
// went back before it came: its burn may pass what the offer posted, recorded as late; and a clear
// sent again by the journal after a failover lost its admission, charging less than its first post
// paid: the gap is the market's, recorded as uncovered.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import pino from 'pino'
import type { Admission } from '../../src/market/admission.ts'
import { admitCheapest } from '../../src/market/admit-from-view.ts'
import { auditMarket } from '../../src/market/audit.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { ClearJournal } from '../../src/market/clear-journal.ts'
import { LadderView } from '../../src/market/ladder-view.ts'
import type { AdmitRefusal } from '../../src/market/refusal-errors.ts'
import {
  type AdmitApartRequest,
  admitApart,
  clearApart,
  type Owners,
  ownerKeyspaces,
  reapOffer,
} from '../../src/market/two-phase.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore } from '../../src/redis/store.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import {
  admitRequest,
  apartOfferRow,
  meteredClear,
  seedAccount as seedMarketAccount,
} from '../helpers/market.ts'
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.ts'
import { saveKeys } from '../helpers/saved-keys.ts'
import { untilRedisPasses } from '../helpers/wait.ts'

let cluster: RedisCluster
let store: Store
let owners: Owners
let prefix: string

beforeAll(async () => {
  cluster = await startRedisCluster()
  store = createStore(cluster.url, { name: 'svc-test-lost-reserve' })
  await store.whenReady(15_000)
  prefix = `t${randomBytes(4).toString('hex')}:{m}`
  owners = ownerKeyspaces(prefix)
})
afterAll(() => {
  store.close()
  cluster.stop()
})

async function seedOffer(ask: number, capacity: number): Promise<string> {
  const id = randomUUID()
  await store.hset(owners.offer(id).offer(id), {
    ...apartOfferRow(id, ask, capacity, 1_000_000),
    supplierId: 'spl_lost_reserve',
  })
  return id
}

async function seedAccount(confirmed: number) {
  const accountId = `acct_${randomBytes(12).toString('hex')}`
  const keys = owners.account(accountId)
  await seedMarketAccount({ store, keys }, confirmed, 50, accountId)
  const digest = randomBytes(32).toString('hex')
  await store.hset(keys.accountKeys(accountId), 'key-1', digest)
  await store.hset(keyspace(prefix).apiKey(digest), { id: 'key-1', accountId })
  return { accountId, digest }
}

const request = (buyer: { accountId: string; digest: string }, over: Partial<AdmitApartRequest> = {}) =>
  ({
    ...admitRequest(buyer.accountId),
    apiKeyDigest: buyer.digest,
    offerId: '',
    maxCents: 50,
    ...over,
  }) as AdmitApartRequest

function admitted(result: Admission | AdmitRefusal): Admission {
  expect(result.code).toBe(AdmitCode.Admitted)
  return result as Admission
}

/**
 * The store, but the first reservation on `offerId` runs and its reply is lost (the connection
 * reset after Redis ran it): what admitCheapest takes for an offer whose slot is away.
 */
function losingFirstReserveOn(offerId: string): Store {
  let lost = false
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== 'sendScript') return Reflect.get(target, prop, receiver)
      return async (name: string, keys: string[], argv: unknown[]) => {
        const reply = await target.sendScript(name as never, keys, argv as never)
        if (name === 'reserve' && !lost && keys[0] === owners.offer(offerId).base) {
          lost = true
          throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })
        }
        return reply
      }
    },
  })
}

describe('a reservation whose reply was lost, the request served by the next offer under the same attempt id', () => {
  async function setup(confirmed: number) {
    const market = keyspace(`${prefix}y${randomBytes(2).toString('hex')}`)
    const first = await seedOffer(40, 5_000_000)
    const next = await seedOffer(40, 5_000_000)
    await store.zadd(market.ladder, 40 * 1e9, first, 40 * 1e9 + 1, next)
    const view = new LadderView(store, market, owners)
    await view.refresh()
    const buyer = await seedAccount(confirmed)
    return { first, next, view, buyer }
  }

  test("the first offer's reaper voids its stray: the clear is posted once, on the offer that served it", async () => {
    const { first, next, view, buyer } = await setup(1_000_000)
    const served = admitted(
      await admitCheapest(losingFirstReserveOn(first), owners, view, request(buyer, { leaseMs: 20 })),
    )
    expect(served.offerId).toBe(next)
    // The lost reply's reservation is on the first offer, under the served attempt's id.
    expect(await store.hget(owners.offer(first).reservation(served.attemptId), 'state')).toBe('reserved')
    const who = { accountId: buyer.accountId, offerId: next, model: 'llama-3.3-70b' }
    const cleared = await clearApart(store, owners, who, meteredClear(served.attemptId, 1_000))
    expect(cleared.charged).toBe(400 as never)
    // The first offer's reservation's lease runs out; the reaper finishes it from the account side.
    const deadline = Number(await store.zscore(owners.offer(first).leases, served.attemptId))
    await untilRedisPasses(store, deadline + 10)
    await reapOffer(store, owners, first)
    const earned = async (id: string) => Number(await store.hget(owners.offer(id).offer(id), 'earned'))
    const spent = Number(await store.hget(owners.account(buyer.accountId).account(buyer.accountId), 'spent'))
    expect(await auditApart(store, prefix)).toEqual([])
    expect((await earned(first)) + (await earned(next))).toBe(spent)
  })

  test("the first offer's reaper leaves the attempt live on the next offer: its hold stays", async () => {
    const { first, next, view, buyer } = await setup(400)
    // The first offer's lease short, the next's as long as a request's.
    const served = admitted(
      await admitCheapest(losingFirstReserveOn(first), owners, view, request(buyer, { leaseMs: 200 })),
    )
    expect(served.offerId).toBe(next)
    const deadline = Number(await store.zscore(owners.offer(first).leases, served.attemptId))
    await untilRedisPasses(store, deadline + 10)
    // The next offer's reservation is renewed, as the relay renews it: its lease is live.
    await store.zadd(owners.offer(next).leases, 'XX', deadline + 600_000, served.attemptId)
    await reapOffer(store, owners, first)
    const state = (await attemptRecord(store, owners.account(buyer.accountId).attempt(served.attemptId)))
      .state
    const acct = await store.hgetall(owners.account(buyer.accountId).account(buyer.accountId))
    expect(state).toBe('admitted')
    expect(acct.held).toBe('400')
  })
})

describe('a late clear held apart', () => {
  test("after the reap gave the offer's capacity to another request: charged, paid, and its burn recorded as late", async () => {
    const keys = keyspace(prefix, 'apart')
    const offerId = await seedOffer(40, 1_000)
    await store.sadd(keys.offers, offerId)
    const buyer = await seedAccount(1_000_000)
    const who = { accountId: buyer.accountId, offerId, model: 'llama-3.3-70b' }
    // Admitted on all the offer's capacity; its replica stops renewing, and the reaper takes it.
    const late = admitted(await admitApart(store, owners, { ...request(buyer, { leaseMs: 20 }), offerId }))
    await untilRedisPasses(store, late.leaseDeadline + 10)
    expect(await reapOffer(store, owners, offerId)).toBe(1)
    // The capacity back, another request takes it all and is served.
    const next = admitted(await admitApart(store, owners, { ...request(buyer), offerId }))
    await clearApart(store, owners, who, meteredClear(next.attemptId, 1_000))
    // The first request's result comes late: the supplier's key served it, the buyer pays for it.
    expect((await clearApart(store, owners, who, meteredClear(late.attemptId, 1_000))).charged).toBe(
      400 as never,
    )
    const offer = await store.hgetall(owners.offer(offerId).offer(offerId))
    expect([offer.burned, offer.lateBurned, offer.earned]).toEqual(['2000', '1000', '800'])
    expect((await auditMarket(store, keys)).filter((f) => f.subject === `offer ${offerId}`)).toEqual([])
    expect(await auditApart(store, prefix)).toEqual([])
  })
})

describe('the clear journal held apart', () => {
  test("a clear its account's master lost with the admission, sent again after the balance went elsewhere: the gap is the market's", async () => {
    const offerId = await seedOffer(40, 5_000_000)
    const buyer = await seedAccount(1_000)
    const who = { accountId: buyer.accountId, offerId, model: 'llama-3.3-70b' }
    const journal = new ClearJournal(
      (attempt, req) =>
        clearApart(store, owners, attempt, { ...req, attemptId: attempt.attemptId, admission: attempt }),
      pino({ level: 'silent' }),
    )
    // The account's shard as its replica has it: before the admission.
    const replica = await saveKeys(store, owners.account(buyer.accountId).prefix)
    const x = admitted(await admitApart(store, owners, { ...request(buyer), offerId }))
    const req = meteredClear(x.attemptId, 1_000)
    expect((await clearApart(store, owners, who, { ...req, admission: x })).charged).toBe(400 as never)
    journal.record({ ...x, model: 'llama-3.3-70b' }, req)
    // The account's master fails over to that replica: admission and clear gone; the offer's
    // master kept the reservation and its post.
    await replica.restore()
    // Another request spends most of the balance on the promoted master before the clear is sent again.
    const y = admitted(
      await admitApart(store, owners, { ...request(buyer, { holdDiem: 2_000 as never }), offerId }),
    )
    await clearApart(store, owners, who, meteredClear(y.attemptId, 2_000))
    journal.lost()
    await journal.settled
    // Charged what was left (200 of its 400, the rest written off); the supplier keeps the 400 its
    // post paid, the 200 between them the market's.
    const reservation = await store.hgetall(owners.offer(offerId).reservation(x.attemptId))
    expect([reservation.earnedUsdc, reservation.uncovered]).toEqual(['400', '200'])
    expect(await store.hget(owners.offer(offerId).offer(offerId), 'uncovered')).toBe('200')
    expect(await auditApart(store, prefix)).toEqual([])
    // Sent again, it changes nothing more.
    await clearApart(store, owners, who, { ...req, admission: x })
    expect(await store.hget(owners.offer(offerId).offer(offerId), 'uncovered')).toBe('200')
  })
})
