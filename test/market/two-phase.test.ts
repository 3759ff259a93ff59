// The two sides of a paid request held apart, each step on its own slot, on a real three-master
// Redis Cluster: accounts spread over shards and an offer under a tag of its own, so that one
// request's steps run on different masters. Money stays exact across the pair: what the account
// was charged is what the offer earned, a refused hold leaves no reservation, stale views of the
// ladder cost a refusal and never a reservation at a wrong price or past capacity, and a replica
// that stops between two steps leaves a reservation the reaper finishes from the account's side.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import Redis from 'ioredis'
import type { Admission } from '../../src/market/admission.ts'
import { admitCheapest } from '../../src/market/admit-from-view.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { clear } from '../../src/market/clearing.ts'
import { LadderView } from '../../src/market/ladder-view.ts'
import { PostQueue } from '../../src/market/post-queue.ts'
import type { AdmitRefusal } from '../../src/market/refusal-errors.ts'
import {
  type AdmitApartRequest,
  admitApart,
  clearApart,
  type Owners,
  ownerKeyspaces,
  reapOffer,
  releaseApart,
} from '../../src/market/two-phase.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { isRedisUnavailable } from '../../src/redis/connection.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { runScript } from '../../src/redis/scripts.ts'
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
import { until, untilRedisPasses } from '../helpers/wait.ts'

let cluster: RedisCluster
let store: Store
let owners: Owners
let prefix: string

beforeAll(async () => {
  cluster = await startRedisCluster()
  store = createStore(cluster.url, { name: 'svc-test-two-phase' })
  await store.whenReady(15_000)
  prefix = `t${randomBytes(4).toString('hex')}:{m}`
  owners = ownerKeyspaces(prefix)
})
// Whatever a test did, every pair across slots still agrees.
afterEach(async () => {
  expect(await auditApart(store, prefix)).toEqual([])
})
afterAll(() => {
  store.close()
  cluster.stop()
})

async function seedOffer(ask: number, capacity: number, maxInFlight = 1_000_000): Promise<string> {
  const id = randomUUID()
  await store.hset(owners.offer(id).offer(id), {
    ...apartOfferRow(id, ask, capacity, maxInFlight),
    supplierId: 'spl_two_phase',
  })
  return id
}

/** An account under its shard's tag, with key-1 active. */
async function seedAccount(confirmed: number, maxPriceCents = 50, marketPrefix = prefix) {
  const accountId = `acct_${randomBytes(12).toString('hex')}`
  const keys = owners.account(accountId)
  await seedMarketAccount({ store, keys }, confirmed, maxPriceCents, accountId)
  const digest = randomBytes(32).toString('hex')
  await store.hset(keys.accountKeys(accountId), 'key-1', digest)
  // The record auth reads, on the market's own slot.
  await store.hset(keyspace(marketPrefix).apiKey(digest), { id: 'key-1', accountId })
  return { accountId, digest }
}

function request(
  buyer: { accountId: string; digest: string },
  offerId: string,
  over: Partial<AdmitApartRequest> = {},
): AdmitApartRequest {
  return { ...admitRequest(buyer.accountId), apiKeyDigest: buyer.digest, offerId, maxCents: 50, ...over }
}

const clearRequest = (attemptId: string, burn: number, feeBps = 0) =>
  meteredClear(attemptId, burn, { feeBps })

function admitted(result: Admission | AdmitRefusal): Admission {
  expect(result.code).toBe(AdmitCode.Admitted)
  return result as Admission
}

const account = (accountId: string) => store.hgetall(owners.account(accountId).account(accountId))
const offer = (offerId: string) => store.hgetall(owners.offer(offerId).offer(offerId))
const reservation = (offerId: string, attemptId: string) =>
  store.hgetall(owners.offer(offerId).reservation(attemptId))
const slotOf = async (key: string) => Number(await store.call('CLUSTER', 'KEYSLOT', key))

/**
 * Begins moving the slot of `key` to another master, no key moved yet (SETSLOT IMPORTING on the
 * target, MIGRATING on the source), and returns what calls the move off.
 */
async function beginSlotMove(key: string): Promise<() => Promise<void>> {
  const slot = await slotOf(key)
  const ranges = (await store.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][]
  const port = ranges.find(([from, to]) => slot >= from && slot <= to)![2][1]
  const source = new Redis(port, '127.0.0.1', { lazyConnect: true })
  const target = new Redis(cluster.nodes.find((n) => n.port !== port)!.port, '127.0.0.1', {
    lazyConnect: true,
  })
  try {
    await target.cluster('SETSLOT', slot, 'IMPORTING', String(await source.cluster('MYID')))
    await source.cluster('SETSLOT', slot, 'MIGRATING', String(await target.cluster('MYID')))
  } catch (error) {
    source.disconnect()
    target.disconnect()
    throw error
  }
  return async () => {
    await target.cluster('SETSLOT', slot, 'STABLE')
    await source.cluster('SETSLOT', slot, 'STABLE')
    source.disconnect()
    target.disconnect()
  }
}

describe('two steps on two slots', () => {
  test("an account's keys share its shard's slot, an offer's its own; the shards spread over every master", async () => {
    const accountId = `acct_${randomBytes(12).toString('hex')}`
    const keys = owners.account(accountId)
    const slots = await Promise.all(
      [
        keys.account(accountId),
        keys.accountKeys(accountId),
        keys.attempt('a.1'),
        keys.accountActivity(accountId),
      ].map(slotOf),
    )
    expect(new Set(slots).size).toBe(1)
    const offerId = randomUUID()
    const offerSlots = await Promise.all(
      [
        owners.offer(offerId).offer(offerId),
        owners.offer(offerId).leases,
        owners.offer(offerId).reservation('a.1'),
      ].map(slotOf),
    )
    expect(new Set(offerSlots).size).toBe(1)
    expect(offerSlots[0]).not.toBe(slots[0])
    // 60 accounts land on all three masters.
    const ranges = (await store.call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][]
    const masterOf = (slot: number) => ranges.find(([from, to]) => slot >= from && slot <= to)![2][1]
    const ids = Array.from({ length: 60 }, () => `acct_${randomBytes(12).toString('hex')}`)
    const masters = new Set(
      await Promise.all(ids.map(async (id) => masterOf(await slotOf(owners.account(id).account(id))))),
    )
    expect(masters.size).toBe(3)
  })

  test('admit, then clear: the account pays burn x ask, the offer earns it less the fee, once', async () => {
    const offerId = await seedOffer(45, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    const adm = admitted(
      await admitApart(store, owners, request(buyer, offerId, { holdDiem: 10_000 as MicroDiem })),
    )
    expect([adm.askCents, adm.holdUsdc]).toEqual([45, 4_500 as never])
    expect(await reservation(offerId, adm.attemptId)).toMatchObject({ state: 'reserved', holdDiem: '10000' })
    expect(await offer(offerId)).toMatchObject({ held: '10000', inflight: '1' })
    expect(await account(buyer.accountId)).toMatchObject({ confirmed: '995500', held: '4500', inflight: '1' })

    const who = { accountId: buyer.accountId, offerId, model: 'llama-3.3-70b' }
    const cleared = await clearApart(store, owners, who, clearRequest(adm.attemptId, 3_333, 1_000))
    expect([cleared.charged, cleared.fee, cleared.burn]).toEqual([1_500, 150, 3_333] as never)
    // A retried clear changes nothing on either side.
    expect((await clearApart(store, owners, who, clearRequest(adm.attemptId, 3_333, 1_000))).replay).toBe(
      true,
    )
    expect(await account(buyer.accountId)).toMatchObject({
      confirmed: '998500',
      held: '0',
      spent: '1500',
      inflight: '0',
    })
    expect(await offer(offerId)).toMatchObject({
      held: '0',
      inflight: '0',
      burned: '3333',
      earned: '1350',
      fees: '150',
    })
    expect(await reservation(offerId, adm.attemptId)).toMatchObject({ state: 'posted', burnDiem: '3333' })
    // Kept as long as the attempt's record, then gone with it.
    const ttl = await store.pttl(owners.offer(offerId).reservation(adm.attemptId))
    expect(ttl).toBeGreaterThan(0)
    expect(
      Math.abs(ttl - (await store.pttl(owners.account(buyer.accountId).attempt(adm.attemptId)))),
    ).toBeLessThan(60_000)
    expect(await store.zcard(owners.offer(offerId).leases)).toBe(0)
    expect(await store.xlen(owners.offer(offerId).supplierFills('spl_two_phase'))).toBe(1)
  })

  test('a bounded burn: billed at most, the rest disputed on the attempt and posted to the offer', async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    const adm = admitted(
      await admitApart(store, owners, request(buyer, offerId, { holdDiem: 10_000 as MicroDiem })),
    )
    const who = { accountId: buyer.accountId, offerId, model: 'llama-3.3-70b' }
    const req = { ...clearRequest(adm.attemptId, 9_000), boundedBurn: 1_000 as MicroDiem }
    const cleared = await clearApart(store, owners, who, req)
    expect([cleared.charged, cleared.burn, cleared.disputed]).toEqual([500, 1_000, 8_000] as never)
    expect(await account(buyer.accountId)).toMatchObject({ confirmed: '999500', held: '0', spent: '500' })
    expect(await offer(offerId)).toMatchObject({ burned: '1000', earned: '500', disputed: '8000' })
  })

  test('a refused hold voids its reservation: the offer has nothing held for it', async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const poor = await seedAccount(100)
    const refused = await admitApart(store, owners, request(poor, offerId))
    expect(refused.code).toBe(AdmitCode.InsufficientBalance)
    expect(await offer(offerId)).toMatchObject({ held: '0', inflight: '0' })
    expect(await store.zcard(owners.offer(offerId).leases)).toBe(0)
    // A key revoked since the caller resolved it: refused, nothing held.
    const buyer = await seedAccount(1_000_000)
    const revoked = await admitApart(store, owners, request({ ...buyer, digest: 'f'.repeat(64) }, offerId))
    expect(revoked.code).toBe(AdmitCode.UnknownKey)
    expect(await offer(offerId)).toMatchObject({ held: '0', inflight: '0' })
    expect(await account(buyer.accountId)).toMatchObject({ confirmed: '1000000', held: '0' })
    // An attempt id used before: refused with nothing held for it on either side.
    const first = admitted(await admitApart(store, owners, request(buyer, offerId)))
    const again = await admitApart(store, owners, request(buyer, offerId, { attemptId: first.attemptId }))
    expect(again.code).toBe(AdmitCode.DuplicateAttempt)
    expect(await offer(offerId)).toMatchObject({ held: '1000', inflight: '1' })
    expect(await account(buyer.accountId)).toMatchObject({ confirmed: '999500', held: '500', inflight: '1' })
  })

  test("a stale view costs a refusal: an ask raised past the buyer's max, capacity gone, a full offer", async () => {
    const offerId = await seedOffer(40, 1_500, 1)
    const buyer = await seedAccount(1_000_000, 45)
    await store.hset(owners.offer(offerId).offer(offerId), 'askCents', 60)
    expect(await admitApart(store, owners, request(buyer, offerId))).toMatchObject({
      code: AdmitCode.NoEligibleSupply,
    })
    // The buyer's own max is the account's, whatever the caller's view says.
    await store.hset(owners.offer(offerId).offer(offerId), 'askCents', 48)
    expect((await admitApart(store, owners, request(buyer, offerId, { maxCents: 80 }))).code).toBe(
      AdmitCode.NoEligibleSupply,
    )
    await store.hset(owners.offer(offerId).offer(offerId), 'askCents', 40)
    admitted(await admitApart(store, owners, request(buyer, offerId)))
    // At its in-flight cap, then without room for a second hold once the cap is lifted.
    expect((await admitApart(store, owners, request(buyer, offerId))).code).toBe(AdmitCode.KeysBusy)
    await store.hset(owners.offer(offerId).offer(offerId), 'maxInFlight', 10)
    expect((await admitApart(store, owners, request(buyer, offerId))).code).toBe(
      AdmitCode.InsufficientRoutable,
    )
    expect(await offer(offerId)).toMatchObject({ held: '1000', inflight: '1' })
    expect(await account(buyer.accountId)).toMatchObject({ held: '400', inflight: '1' })
  })

  test('a failure releases the hold and voids the reservation, cooling the offer down', async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    const adm = admitted(await admitApart(store, owners, request(buyer, offerId)))
    const who = { accountId: buyer.accountId, offerId, model: 'llama-3.3-70b' }
    const failure = {
      attemptId: adm.attemptId,
      errorCode: 'upstream_error',
      cooldownMs: 60_000,
      upstreamBalance: null,
    }
    expect(await releaseApart(store, owners, who, failure)).toBe(true)
    expect(await releaseApart(store, owners, who, failure)).toBe(false)
    expect(await account(buyer.accountId)).toMatchObject({ confirmed: '1000000', held: '0', inflight: '0' })
    const o = await offer(offerId)
    expect([o.held, o.inflight]).toEqual(['0', '0'])
    expect(Number(o.cooldownUntil)).toBeGreaterThan(Date.now())
    expect(await reservation(offerId, adm.attemptId)).toMatchObject({ state: 'voided' })
    expect(await store.pttl(owners.offer(offerId).reservation(adm.attemptId))).toBeGreaterThan(0)
  })

  test("the reaper's due reservations are read on the offer's slot: past their lease, the earliest first, at most the limit", async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    const base = owners.offer(offerId).base
    const due = (limit: number) => runScript(store, 'due', [base], { limit }) as Promise<string[]>
    const first = admitted(await admitApart(store, owners, request(buyer, offerId, { leaseMs: 20 })))
    const second = admitted(await admitApart(store, owners, request(buyer, offerId, { leaseMs: 40 })))
    const long = admitted(await admitApart(store, owners, request(buyer, offerId, { leaseMs: 60_000 })))
    await until(async () => (await due(10)).length === 2)
    expect(await due(10)).toEqual([first.attemptId, second.attemptId])
    expect(await due(1)).toEqual([first.attemptId])
    expect(await reapOffer(store, owners, offerId)).toBe(2)
    expect(await due(10)).toEqual([])
    const who = { accountId: buyer.accountId, offerId, model: long.model }
    const failure = {
      attemptId: long.attemptId,
      errorCode: 'upstream_error',
      cooldownMs: 0,
      upstreamBalance: null,
    }
    expect(await releaseApart(store, owners, who, failure)).toBe(true)
  })

  test('a replica gone between two steps: the reaper finishes what it left, from the account side', async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    const short = { leaseMs: 20 }
    // Gone after the clear's first step: charged, never posted.
    const cleared = admitted(await admitApart(store, owners, request(buyer, offerId, short)))
    await clear(store, owners.account(buyer.accountId), {
      ...clearRequest(cleared.attemptId, 600),
      offerApart: true,
    })
    // Gone while the supplier answered: admitted, never ended.
    const open = admitted(await admitApart(store, owners, request(buyer, offerId, short)))
    // Gone after reserving: no hold was ever made.
    const lone = randomUUID()
    await runScript(store, 'reserve', [owners.offer(offerId).base], {
      attemptId: lone,
      offerId,
      holdDiem: 1_000,
      maxCents: 50,
      leaseMs: 20,
      accountId: buyer.accountId,
      now: '',
      recordRetentionMs: 60_000,
    })
    expect(await offer(offerId)).toMatchObject({ held: '3000', inflight: '3' })

    await untilRedisPasses(store, Math.max(cleared.leaseDeadline, open.leaseDeadline) + 50)
    expect(await reapOffer(store, owners, offerId)).toBe(3)
    expect(await reapOffer(store, owners, offerId)).toBe(0)
    expect(await offer(offerId)).toMatchObject({ held: '0', inflight: '0', burned: '600', earned: '300' })
    expect(await account(buyer.accountId)).toMatchObject({
      confirmed: '999700',
      held: '0',
      spent: '300',
      inflight: '0',
    })
    expect((await reservation(offerId, cleared.attemptId)).state).toBe('posted')
    expect((await reservation(offerId, open.attemptId)).state).toBe('voided')
    expect((await reservation(offerId, lone)).state).toBe('voided')
    const attempt = (await attemptRecord(store, owners.account(buyer.accountId).attempt(open.attemptId)))
      .state
    expect(attempt).toBe('reaped')
  })

  test("a clear whose post the offer's slot refuses for now (the slot being moved): the charge stands, the reaper posts it", async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    const adm = admitted(await admitApart(store, owners, request(buyer, offerId, { leaseMs: 20 })))
    expect(await slotOf(owners.offer(offerId).base)).not.toBe(
      await slotOf(owners.account(buyer.accountId).base),
    )
    // The offer's slot begun moving to another master, no key moved yet.
    const callOff = await beginSlotMove(owners.offer(offerId).base)
    try {
      const who = { accountId: buyer.accountId, offerId, model: 'llama-3.3-70b' }
      const cleared = await clearApart(store, owners, who, clearRequest(adm.attemptId, 600))
      expect(cleared.charged).toBe(300 as never)
      expect(await account(buyer.accountId)).toMatchObject({ held: '0', spent: '300', inflight: '0' })
      expect((await reservation(offerId, adm.attemptId)).state).toBe('reserved')
    } finally {
      await callOff()
    }
    await untilRedisPasses(store, adm.leaseDeadline + 50)
    expect(await reapOffer(store, owners, offerId)).toBe(1)
    expect(await reservation(offerId, adm.attemptId)).toMatchObject({ state: 'posted', burnDiem: '600' })
    expect(await offer(offerId)).toMatchObject({ held: '0', inflight: '0', burned: '600', earned: '300' })
  })

  test('200 concurrent admits from 20 accounts on one offer with room for 50 holds: exactly 50, and exact money after', async () => {
    const offerId = await seedOffer(50, 50_000)
    const buyers = await Promise.all(Array.from({ length: 20 }, () => seedAccount(1_000_000)))
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => admitApart(store, owners, request(buyers[i % 20]!, offerId))),
    )
    const admittedOnes = results.filter((r) => r.code === AdmitCode.Admitted) as Admission[]
    expect(admittedOnes.length).toBe(50)
    expect(results.filter((r) => r.code === AdmitCode.InsufficientRoutable).length).toBe(150)
    await Promise.all(
      admittedOnes.map((a) =>
        clearApart(
          store,
          owners,
          { accountId: a.accountId, offerId, model: 'm' },
          clearRequest(a.attemptId, 700, 500),
        ),
      ),
    )
    const o = await offer(offerId)
    const accounts = await Promise.all(buyers.map((b) => account(b.accountId)))
    const spent = accounts.reduce((sum, a) => sum + Number(a.spent), 0)
    expect(spent).toBe(50 * 350)
    expect(Number(o.earned) + Number(o.fees)).toBe(spent)
    expect([o.held, o.inflight, o.burned]).toEqual(['0', '0', String(50 * 700)])
    for (const a of accounts) {
      expect(Number(a.confirmed) + Number(a.held) + Number(a.spent)).toBe(Number(a.funded))
      expect([a.held, a.inflight]).toEqual(['0', '0'])
    }
  })
})

describe('a periodic key budget held apart', () => {
  test("binds across its UTC boundary on the account's slot; a clear past it counts in the period that admitted it", async () => {
    const at = (iso: string) => Date.parse(iso)
    const offerId = await seedOffer(50, 1_000_000_000)
    const buyer = await seedAccount(1_000_000_000)
    const acct = owners.account(buyer.accountId).account(buyer.accountId)
    // At 50 cents a 1,000 micro-DIEM worst case holds 500 micro-USDC: two in the day's limit.
    await store.hset(acct, 'limit:key-1', 1_000, 'reset:key-1', 'daily')
    const who = { accountId: buyer.accountId, offerId, model: 'llama-3.3-70b' }
    const admitAt = (iso: string) =>
      admitApart(store, owners, request(buyer, offerId, { now: at(iso), leaseMs: 86_400_000 }))
    const first = admitted(await admitAt('2026-03-10T10:00:00.000Z'))
    await clearApart(store, owners, who, clearRequest(first.attemptId, 1_000))
    const late = admitted(await admitAt('2026-03-10T23:59:00.000Z'))
    expect(await admitAt('2026-03-10T23:59:30.000Z')).toMatchObject({
      code: AdmitCode.KeyLimit,
      used: 1_000,
      resetsAt: at('2026-03-11T00:00:00.000Z'),
    })
    // The new day: its budget is whole, less the hold still in flight from the day before.
    const next = admitted(await admitAt('2026-03-11T00:01:00.000Z'))
    expect((await admitAt('2026-03-11T00:02:00.000Z')).code).toBe(AdmitCode.KeyLimit)
    await clearApart(store, owners, who, clearRequest(late.attemptId, 1_000))
    await clearApart(store, owners, who, clearRequest(next.attemptId, 1_000))
    expect(await store.hmget(acct, 'spent:key-1', 'held:key-1', 'pstart:key-1', 'pspent:key-1')).toEqual([
      '1500',
      '0',
      String(at('2026-03-11T00:00:00.000Z')),
      '500',
    ])
  })
})

describe('the cheapest offer from a view that may be stale', () => {
  test('each admission goes to the cheapest offer that can take it now, whatever the view said', async () => {
    const market = keyspace(`${prefix}x`)
    const cheap = await seedOffer(40, 1_500)
    const middle = await seedOffer(45, 5_000_000)
    const dear = await seedOffer(50, 5_000_000)
    for (const [i, id] of [cheap, middle, dear].entries()) {
      await store.zadd(market.ladder, [40, 45, 50][i]! * 1e9 + i, id)
    }
    const view = new LadderView(store, market, owners)
    await view.refresh()
    expect(view.current.map((o) => [o.ask, o.routable])).toEqual([
      [40, 1_500],
      [45, 5_000_000],
      [50, 5_000_000],
    ])
    const buyer = await seedAccount(1_000_000, 48)
    const ask = async () => {
      const result = await admitCheapest(store, owners, view, request(buyer, ''))
      return result.code === AdmitCode.Admitted ? (result as Admission).askCents : result.code
    }
    // The view is read once: the cheapest takes one hold, its reply says it has no room left, and
    // it is passed over.
    expect(await ask()).toBe(40)
    expect(await ask()).toBe(45)
    // The middle offer raised its ask past the buyer's max since the view was read: never sold at
    // it, and its refusal tells the view its ask: nothing at or below 48 has room.
    await store.hset(owners.offer(middle).offer(middle), 'askCents', 60)
    expect(await ask()).toBe(AdmitCode.InsufficientRoutable)
    expect(await offer(middle)).toMatchObject({ inflight: '1' })
    expect(view.current.map((o) => o.ask)).toEqual([40, 50, 60])
    // Back at 45 and read again: sold there, and the dear offer never held anything.
    await store.hset(owners.offer(middle).offer(middle), 'askCents', 45)
    await view.refresh()
    expect(await ask()).toBe(45)
    expect(await offer(dear)).toMatchObject({ held: '0', inflight: '0' })
    // Nothing at the buyer's price: the view's refusal names the cheapest posted above it.
    const stingy = await seedAccount(1_000_000, 30)
    const refused = await admitCheapest(store, owners, view, { ...request(stingy, ''), maxCents: 30 })
    expect(refused).toMatchObject({
      code: AdmitCode.NoEligibleSupply,
      buyerMaxCents: 30,
      cheapestPostedCents: 40,
    })
  })
})

describe('offers of one ask', () => {
  test('share the requests: the roomiest first, reservations on their way counted; a reply corrects the view', async () => {
    const market = keyspace(`${prefix}z`)
    const ids = [
      await seedOffer(40, 5_000_000, 4),
      await seedOffer(40, 5_000_000, 4),
      await seedOffer(40, 5_000_000, 4),
    ]
    for (const [i, id] of ids.entries()) await store.zadd(market.ladder, 40 * 1e9 + i, id)
    let reserves = 0
    const counting: Store = {
      ...store,
      sendScript(name, keys, argv) {
        if (name === 'reserve') reserves++
        return store.sendScript(name, keys, argv)
      },
    }
    const view = new LadderView(counting, market, owners)
    await view.refresh()
    const buyers = await Promise.all(Array.from({ length: 13 }, () => seedAccount(1_000_000)))
    // Twelve at once from a view read once: each offer takes four, and no reservation is refused
    // (walked in the ladder's order, the first offer would refuse eight and the second four).
    const first = await Promise.all(
      buyers
        .slice(0, 12)
        .map(async (buyer) => admitted(await admitCheapest(counting, owners, view, request(buyer, '')))),
    )
    expect(reserves).toBe(12)
    for (const id of ids) {
      expect(first.filter((a) => a.offerId === id)).toHaveLength(4)
      expect(await offer(id)).toMatchObject({ inflight: '4' })
    }
    expect(view.current.map((o) => [o.inflight, o.full])).toEqual([
      [4, true],
      [4, true],
      [4, true],
    ])
    // The view knows all three are full: the thirteenth is refused without a call to any offer.
    const last = buyers[12]!
    expect((await admitCheapest(counting, owners, view, request(last, ''))).code).toBe(AdmitCode.KeysBusy)
    expect(reserves).toBe(12)
    // One of this replica's requests on an offer fails and ends; the view is told, as MarketSteps tells it.
    const endOne = async (offerId: string) => {
      const a = first.find((one) => one.offerId === offerId)!
      const who = { accountId: a.accountId, offerId, model: a.model }
      const failure = {
        attemptId: a.attemptId,
        errorCode: 'upstream_error',
        cooldownMs: 0,
        upstreamBalance: null,
      }
      expect(await releaseApart(store, owners, who, failure)).toBe(true)
      view.ended(offerId)
    }
    // One on the second offer ends: the view sends the next request there.
    await endOne(ids[1]!)
    expect(admitted(await admitCheapest(counting, owners, view, request(last, ''))).offerId).toBe(ids[1]!)
    expect(reserves).toBe(13)
    // Another replica took the third offer's freed slot behind this view's back: the refusal's
    // reply tells the view the offer is full again.
    await endOne(ids[2]!)
    await store.hset(owners.offer(ids[2]!).offer(ids[2]!), 'inflight', 4)
    expect(view.current[2]).toMatchObject({ inflight: 3, full: false })
    expect((await admitCheapest(counting, owners, view, request(last, ''))).code).toBe(AdmitCode.KeysBusy)
    expect(reserves).toBe(14)
    expect(view.current[2]).toMatchObject({ inflight: 4, full: true })
    await store.hset(owners.offer(ids[2]!).offer(ids[2]!), 'inflight', 3)
  })
})

describe('an offer whose slot is being moved', () => {
  test('is passed over for the next offer, the account untouched by it; with no other, the outage is the answer', async () => {
    const market = keyspace(`${prefix}y`)
    const moving = await seedOffer(40, 5_000_000)
    const next = await seedOffer(45, 5_000_000)
    await store.zadd(market.ladder, 40 * 1e9, moving, 45 * 1e9 + 1, next)
    const view = new LadderView(store, market, owners)
    await view.refresh()
    const buyer = await seedAccount(1_000_000)
    const callOff = await beginSlotMove(owners.offer(moving).base)
    try {
      const served = admitted(await admitCheapest(store, owners, view, request(buyer, '')))
      expect(served).toMatchObject({ offerId: next, askCents: 45 })
      expect(await store.exists(owners.offer(moving).reservation(served.attemptId))).toBe(0)
      expect(await offer(moving)).toMatchObject({ held: '0', inflight: '0' })
      expect(await account(buyer.accountId)).toMatchObject({ inflight: '1' })
      // The next offer already tried: nothing else could take it, and the buyer is told the store is away.
      const refused = await admitCheapest(store, owners, view, request(buyer, '', { tried: [next] })).then(
        () => null,
        (error: unknown) => error,
      )
      expect(isRedisUnavailable(refused)).toBe(true)
      expect(await account(buyer.accountId)).toMatchObject({ inflight: '1' })
    } finally {
      await callOff()
    }
    // The slot whole again: the cheapest serves.
    const back = admitted(await admitCheapest(store, owners, view, request(buyer, '')))
    expect(back).toMatchObject({ offerId: moving, askCents: 40 })
    // Both holds released: nothing left held for the audit after.
    const other = admitted(await admitCheapest(store, owners, view, request(buyer, '', { tried: [moving] })))
    for (const adm of [back, other]) {
      const who = { accountId: buyer.accountId, offerId: adm.offerId, model: 'llama-3.3-70b' }
      const failure = {
        attemptId: adm.attemptId,
        errorCode: 'upstream_error',
        cooldownMs: 0,
        upstreamBalance: null,
      }
      expect(await releaseApart(store, owners, who, failure)).toBe(true)
    }
  })
})

describe('posts queued per offer', () => {
  // A bound no test outlives: the queue goes out only when carried, flushed or reaped.
  const held = () => new PostQueue(store, (offerId) => owners.offer(offerId).base, 600_000)
  const who = (accountId: string, offerId: string) => ({ accountId, offerId, model: 'llama-3.3-70b' })
  /** Clears an admission held apart, its post queued on `posts`. */
  const clearQueued = (
    buyer: { accountId: string },
    offerId: string,
    a: Admission,
    burn: number,
    posts: PostQueue,
    feeBps = 0,
  ) =>
    clearApart(store, owners, who(buyer.accountId, offerId), clearRequest(a.attemptId, burn, feeBps), posts)
  const served = async (offerId: string) => {
    const day = new Date(Number((await store.time())[0]) * 1000).toISOString().slice(0, 10)
    return Number((await store.hget(owners.offer(offerId).statsDay(day), 'llama-3.3-70b')) ?? 0)
  }

  test("ride the offer's next reservation, refused or not, first: the capacity they give back counts for it, each applied once", async () => {
    const offerId = await seedOffer(45, 5_000_000, 1)
    const buyer = await seedAccount(1_000_000)
    const posts = held()
    const first = admitted(await admitApart(store, owners, request(buyer, offerId), posts))
    await clearQueued(buyer, offerId, first, 800, posts, 1_000)
    // Charged on the account; the offer's side waits in the queue.
    expect((await account(buyer.accountId)).spent).toBe('360')
    expect(await reservation(offerId, first.attemptId)).toMatchObject({ state: 'reserved' })
    expect(await offer(offerId)).toMatchObject({ inflight: '1', earned: '0' })

    // Refused for its price (the buyer's max below the ask), the reservation still posts what it carried.
    const refused = await admitApart(store, owners, request(buyer, offerId, { maxCents: 10 }), posts)
    expect(refused.code).toBe(AdmitCode.NoEligibleSupply)
    expect(await reservation(offerId, first.attemptId)).toMatchObject({ state: 'posted', burnDiem: '800' })
    expect(await offer(offerId)).toMatchObject({
      held: '0',
      inflight: '0',
      burned: '800',
      earned: '324',
      fees: '36',
    })
    expect(posts.take(offerId)).toBeNull()

    // At its in-flight cap of 1, the offer takes the next request once the post it carries frees the slot.
    const second = admitted(await admitApart(store, owners, request(buyer, offerId), posts))
    await clearQueued(buyer, offerId, second, 500, posts)
    expect(await offer(offerId)).toMatchObject({ inflight: '1' })
    const third = admitted(await admitApart(store, owners, request(buyer, offerId), posts))
    expect(await reservation(offerId, second.attemptId)).toMatchObject({ state: 'posted' })
    expect(await offer(offerId)).toMatchObject({ inflight: '1', burned: '1300', earned: '549' })

    // The last goes out at close; carried or flushed again, nothing counts twice.
    await clearQueued(buyer, offerId, third, 500, posts)
    await posts.flush()
    await posts.flush()
    const again = await runScript(
      store,
      'post',
      [owners.offer(offerId).base],
      { recordRetentionMs: 60_000, offerId },
      [first.attemptId, 800, 324, 36, 0, '', '', 45, 'llama-3.3-70b', '', ''],
    )
    expect(again).toEqual([0])
    expect(await offer(offerId)).toMatchObject({ held: '0', inflight: '0', burned: '1800', earned: '774' })
    expect(Number((await account(buyer.accountId)).spent)).toBe(360 + 225 + 225)
    expect(await served(offerId)).toBe(3)
    expect(await store.xlen(owners.offer(offerId).supplierFills('spl_two_phase'))).toBe(3)
  })

  test("a reservation the offer's slot lost (a failover) is posted from what its post carries, once; never on an offer the slot lost too", async () => {
    const offerId = await seedOffer(45, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    // The offer's slot as it was before the reservation: what a replica that never got it has.
    const before = await saveKeys(store, owners.offer(offerId).prefix)
    const a = admitted(await admitApart(store, owners, request(buyer, offerId)))
    await before.restore()
    expect(await reservation(offerId, a.attemptId)).toEqual({})
    await clearApart(store, owners, who(buyer.accountId, offerId), clearRequest(a.attemptId, 800, 1_000))
    expect((await account(buyer.accountId)).spent).toBe('360')
    expect(await reservation(offerId, a.attemptId)).toMatchObject({
      state: 'posted',
      lost: '1',
      offerId,
      askCents: '45',
      burnDiem: '800',
      earnedUsdc: '324',
      feeUsdc: '36',
    })
    expect(await offer(offerId)).toMatchObject({
      held: '0',
      inflight: '0',
      burned: '800',
      earned: '324',
      fees: '36',
    })
    expect(await served(offerId)).toBe(1)
    const fills = await store.xrange(owners.offer(offerId).supplierFills('spl_two_phase'), '-', '+')
    expect(fills).toHaveLength(1)
    expect(fills[0]![1]).toContain('45')
    // Posted again (a replay, the journal): nothing twice.
    const values = [a.attemptId, 800, 324, 36, 0, '', '', 45, 'llama-3.3-70b', '', '']
    const again = await runScript(
      store,
      'post',
      [owners.offer(offerId).base],
      { recordRetentionMs: 60_000, offerId },
      values,
    )
    expect(again).toEqual([0])
    // An offer its slot does not have: nothing written.
    const gone = randomUUID()
    const onGone = await runScript(
      store,
      'post',
      [owners.offer(gone).base],
      { recordRetentionMs: 60_000, offerId: gone },
      [randomUUID(), 800, 324, 36, 0, '', '', 45, 'llama-3.3-70b', '', ''],
    )
    expect(onGone).toEqual([-1])
    expect(await store.exists(owners.offer(gone).offer(gone))).toBe(0)
  })

  test('posts of one lost reservation sent at once write it once', async () => {
    const offerId = await seedOffer(45, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    const before = await saveKeys(store, owners.offer(offerId).prefix)
    const a = admitted(await admitApart(store, owners, request(buyer, offerId)))
    await before.restore()
    // The account's side charged, the offer's not yet posted.
    await clear(store, owners.account(buyer.accountId), {
      ...clearRequest(a.attemptId, 800, 1_000),
      offerApart: true,
    })
    const values = [a.attemptId, 800, 324, 36, 0, '', '', 45, 'llama-3.3-70b', '', '']
    const codes = await Promise.all(
      Array.from({ length: 6 }, () =>
        runScript(
          store,
          'post',
          [owners.offer(offerId).base],
          { recordRetentionMs: 60_000, offerId },
          values,
        ),
      ),
    )
    expect(codes.flat().sort()).toEqual([0, 0, 0, 0, 0, 2])
    expect(await offer(offerId)).toMatchObject({ burned: '800', earned: '324', fees: '36' })
    expect(await served(offerId)).toBe(1)
  })

  test('an offer no reservation comes to is posted alone within the bound, its posts in one call', async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const buyers = await Promise.all(Array.from({ length: 3 }, () => seedAccount(1_000_000)))
    const posts = new PostQueue(store, (id) => owners.offer(id).base)
    const admissions = await Promise.all(
      buyers.map(async (b) => admitted(await admitApart(store, owners, request(b, offerId), posts))),
    )
    await Promise.all(admissions.map((a, i) => clearQueued(buyers[i]!, offerId, a, 1_000, posts)))
    await until(async () => (await offer(offerId)).inflight === '0')
    for (const a of admissions) expect((await reservation(offerId, a.attemptId)).state).toBe('posted')
    expect(await offer(offerId)).toMatchObject({ held: '0', burned: '3000', earned: '1500' })
    expect(await served(offerId)).toBe(3)
  })

  test("at close, an offer's queue goes in one call: each post counted once, in the stats and the fills", async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    const posts = held()
    const admissions: Admission[] = []
    for (let i = 0; i < 3; i++)
      admissions.push(admitted(await admitApart(store, owners, request(buyer, offerId), posts)))
    for (const a of admissions) await clearQueued(buyer, offerId, a, 400, posts)
    expect(await offer(offerId)).toMatchObject({ inflight: '3', burned: '0' })
    await posts.flush()
    expect(await offer(offerId)).toMatchObject({ held: '0', inflight: '0', burned: '1200', earned: '600' })
    expect(await store.zcard(owners.offer(offerId).leases)).toBe(0)
    expect(await served(offerId)).toBe(3)
    expect(await store.xlen(owners.offer(offerId).supplierFills('spl_two_phase'))).toBe(3)
  })

  test('close waits for a queue already on its way alone, not only for what is still queued', async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    // A store whose posts wait for the test to let them through.
    let letThrough = () => {}
    const gate = new Promise<void>((resolve) => {
      letThrough = resolve
    })
    let sent = false
    let posted = false
    const gated = new Proxy(store, {
      get(target, name, receiver) {
        if (name !== 'sendScript') return Reflect.get(target, name, receiver)
        return async (script: string, keys: string[], argv: (string | number)[]) => {
          if (script !== 'post') return target.sendScript(script as never, keys, argv)
          sent = true
          await gate
          const reply = await target.sendScript(script as never, keys, argv)
          posted = true
          return reply
        }
      },
    })
    const posts = new PostQueue(gated, (id) => owners.offer(id).base, 1)
    const a = admitted(await admitApart(store, owners, request(buyer, offerId)))
    await clearQueued(buyer, offerId, a, 500, posts)
    await until(() => sent)
    const closed = posts.flush()
    letThrough()
    await closed
    expect(posted).toBe(true)
    expect(await reservation(offerId, a.attemptId)).toMatchObject({ state: 'posted' })
  })

  test('a replica gone with posts queued: once their leases run out the reaper posts each, once, from the account side', async () => {
    const offerId = await seedOffer(50, 5_000_000)
    const buyer = await seedAccount(1_000_000)
    // The replica's queue, never flushed: the replica stopped without its close.
    const gone = held()
    const admissions = [
      admitted(await admitApart(store, owners, request(buyer, offerId, { leaseMs: 20 }), gone)),
      admitted(await admitApart(store, owners, request(buyer, offerId, { leaseMs: 20 }), gone)),
    ]
    for (const a of admissions) await clearQueued(buyer, offerId, a, 600, gone, 1_000)
    expect(await offer(offerId)).toMatchObject({ inflight: '2', earned: '0' })

    await untilRedisPasses(store, Math.max(...admissions.map((a) => a.leaseDeadline)))
    expect(await reapOffer(store, owners, offerId)).toBe(2)
    expect(await reapOffer(store, owners, offerId)).toBe(0)
    for (const a of admissions)
      expect(await reservation(offerId, a.attemptId)).toMatchObject({ state: 'posted', burnDiem: '600' })
    const o = await offer(offerId)
    expect([o.held, o.inflight, o.burned, o.earned, o.fees]).toEqual(['0', '0', '1200', '540', '60'])
    expect((await account(buyer.accountId)).spent).toBe('600')
    expect(await served(offerId)).toBe(2)
  })

  test('under load, requests over three offers at their in-flight caps: every pair agrees and the money is exact', async () => {
    const offerIds = await Promise.all([
      seedOffer(40, 50_000_000, 4),
      seedOffer(45, 50_000_000, 4),
      seedOffer(50, 50_000_000, 4),
    ])
    const buyers = await Promise.all(Array.from({ length: 12 }, () => seedAccount(10_000_000)))
    const posts = new PostQueue(store, (id) => owners.offer(id).base)
    let served = 0
    let next = 0
    const worker = async () => {
      while (next < 300) {
        const i = next++
        const buyer = buyers[i % buyers.length]!
        // The cheapest offer with room takes it, as the ladder's walk does.
        for (const offerId of offerIds) {
          const result = await admitApart(store, owners, request(buyer, offerId), posts)
          if (result.code !== AdmitCode.Admitted) continue
          await clearQueued(buyer, offerId, result, 700, posts, 500)
          served++
          break
        }
      }
    }
    await Promise.all(Array.from({ length: 16 }, worker))
    await posts.flush()
    expect(served).toBeGreaterThan(0)
    let spent = 0
    for (const b of buyers) {
      const a = await account(b.accountId)
      expect([a.held, a.inflight]).toEqual(['0', '0'])
      expect(Number(a.confirmed) + Number(a.spent)).toBe(10_000_000)
      spent += Number(a.spent)
    }
    let earned = 0
    let burned = 0
    for (const offerId of offerIds) {
      const o = await offer(offerId)
      expect([o.held, o.inflight]).toEqual(['0', '0'])
      earned += Number(o.earned) + Number(o.fees)
      burned += Number(o.burned)
    }
    expect(burned).toBe(served * 700)
    expect(earned).toBe(spent)
  })
})

describe('the audit across slots', () => {
  test('names a clear never posted, a posting that disagrees, and a hold its offer does not know', async () => {
    const auditPrefix = `t${randomBytes(4).toString('hex')}:{m}`
    const own = ownerKeyspaces(auditPrefix)
    const saved = owners
    owners = own
    try {
      const offerId = await seedOffer(50, 5_000_000)
      const buyer = await seedAccount(1_000_000, 50, auditPrefix)
      const posted = admitted(await admitApart(store, own, request(buyer, offerId)))
      const who = { accountId: buyer.accountId, offerId, model: 'm' }
      await clearApart(store, own, who, clearRequest(posted.attemptId, 800, 1_000))
      // One left open: admitted on its account, reserved on its offer.
      admitted(await admitApart(store, own, request(buyer, offerId)))
      expect(await auditApart(store, auditPrefix)).toEqual([])

      // The clear's first step only: the charge is in transit, and its reservation is named.
      const transit = admitted(await admitApart(store, own, request(buyer, offerId)))
      await clear(store, own.account(buyer.accountId), {
        ...clearRequest(transit.attemptId, 600),
        offerApart: true,
      })
      expect(await auditApart(store, auditPrefix)).toEqual([
        {
          subject: `attempt ${transit.attemptId}`,
          problem: 'cleared on its account but its reservation is not posted',
        },
      ])
      await clearApart(store, own, who, clearRequest(transit.attemptId, 600))
      expect(await auditApart(store, auditPrefix)).toEqual([])

      // A posting that disagrees with its clear, and an offer that lost track of a hold.
      await store.hset(own.offer(offerId).reservation(posted.attemptId), 'burnDiem', 801)
      await store.hincrby(own.offer(offerId).offer(offerId), 'held', -1_000)
      const problems = (await auditApart(store, auditPrefix)).map((f) => `${f.subject}: ${f.problem}`)
      expect(problems).toEqual([
        `attempt ${posted.attemptId}: posted burn 801 != cleared burn 800`,
        `offer ${offerId}: held 0 != its pending reservations 1000`,
      ])
    } finally {
      owners = saved
    }
  })
})
