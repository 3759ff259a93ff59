// Held apart, on a real three-master Redis Cluster: a supplier key's upstream balance holds on the
// UTC day it was learned (its DIEM allocation resets at 00:00 UTC). A 402 voids the reservation and
// records the key as empty: the offer is off the view's ladder for the rest of the day, and a view
// read just before midnight does not keep it off past it. A reservation made before midnight whose
// clear is posted after it (alone, or carried on the offer's next reservation) does not record its
// balance as the new day's. The view runs on a clock of the test's; a reservation takes its time
// now as an argument; the post and the void run on Redis's clock.
import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import type { Admission } from '../../src/market/admission.ts'
import { admitCheapest } from '../../src/market/admit-from-view.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { clear } from '../../src/market/clearing.ts'
import { LadderView } from '../../src/market/ladder-view.ts'
import { OfferIndex } from '../../src/market/offer-index.ts'
import { PostQueue, postValues } from '../../src/market/post-queue.ts'
import { clearApart, ownerKeyspaces, releaseApart } from '../../src/market/two-phase.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { dayOf } from '../../src/records/days.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { admitRequest, apartOfferRow, meteredClear, seedAccount } from '../helpers/market.ts'
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.ts'

const DAY_MS = 86_400_000
const HOLD = 1_000 as MicroDiem

let cluster: RedisCluster
let store: Store
const markets: string[] = []

beforeAll(async () => {
  cluster = await startRedisCluster()
  store = createStore(cluster.url, { name: 'svc-test-balance-day-apart' })
  await store.whenReady(15_000)
})
afterEach(async () => {
  for (const prefix of markets.splice(0)) expect(await auditApart(store, prefix)).toEqual([])
})
afterAll(() => {
  store.close()
  cluster.stop()
})

/** A market held apart with one offer on its own slot, a buyer, and a view on the test's clock. */
async function market() {
  const prefix = `t${randomBytes(4).toString('hex')}:{b}`
  markets.push(prefix)
  const keys = keyspace(prefix, 'apart')
  const owners = ownerKeyspaces(prefix)
  const offerId = randomUUID()
  const offerKey = owners.offer(offerId).offer(offerId)
  await store.hset(offerKey, { ...apartOfferRow(offerId, 40, 5_000_000, 1_000), balance: '', seq: 1 })
  await new OfferIndex(store, keys).place(offerId)
  const accountId = `acct_${randomBytes(12).toString('hex')}`
  await seedAccount({ store, keys: owners.account(accountId) }, 100_000_000, 50, accountId)
  const clock = { now: Date.now() }
  const view = new LadderView(store, keys, owners, () => clock.now)
  const admit = async (now = clock.now, posts?: PostQueue) => {
    await view.check()
    return admitCheapest(
      store,
      owners,
      view,
      { ...admitRequest(accountId, { holdDiem: HOLD, now }), maxCents: 50 },
      posts,
    )
  }
  const who = (a: Admission) => ({ accountId, offerId: a.offerId, model: a.model })
  const end = (a: Admission, upstreamBalance: number | null) =>
    releaseApart(store, owners, who(a), {
      attemptId: a.attemptId,
      upstreamGen: a.upstreamGen,
      errorCode: upstreamBalance === 0 ? 'upstream_out_of_balance' : 'upstream_error',
      cooldownMs: 0,
      upstreamBalance: upstreamBalance as MicroDiem | null,
    })
  const settle = (a: Admission, after: number, posts?: PostQueue) =>
    clearApart(
      store,
      owners,
      who(a),
      meteredClear(a.attemptId, 400, {
        upstreamBalanceAfter: after as MicroDiem,
        upstreamGen: a.upstreamGen,
      }),
      posts,
    )
  return { owners, accountId, offerId, offerKey, clock, view, admit, end, settle }
}

const admittedOn = (result: unknown) => {
  expect((result as { code: number }).code).toBe(AdmitCode.Admitted)
  return result as Admission
}

test('a 402 keeps the offer off the ladder for the rest of its UTC day; a view read before midnight takes it again after', async () => {
  const m = await market()
  expect(await m.end(admittedOn(await m.admit()), 0)).toBe(true)
  expect(await store.hget(m.offerKey, 'balance')).toBe('0')
  expect((await m.admit()).code).toBe(AdmitCode.InsufficientRoutable)
  // A tenth of a second before midnight, the view read again: still nothing routable.
  const midnight = (dayOf(Date.now()) + 1) * DAY_MS
  m.clock.now = midnight - 100
  expect((await m.admit()).code).toBe(AdmitCode.InsufficientRoutable)
  expect(m.view.current[0]).toMatchObject({ id: m.offerId, routable: 0 })
  // Just past it, well within the view's full-read period and with the ladder's version unchanged:
  // the reset balance no longer caps the offer, and no call had to refresh it.
  m.clock.now = midnight + 100
  const next = admittedOn(await m.admit())
  expect(next.offerId).toBe(m.offerId)
  expect(next.upstreamBalance).toBeNull()
  expect(m.view.current[0]!.routable).toBe(5_000_000 - HOLD)
  expect(await m.end(next, null)).toBe(true)
})

test("a reservation made before midnight and posted after it does not record its balance as the new day's", async () => {
  const m = await market()
  const yesterday = admittedOn(await m.admit(Date.now() - DAY_MS))
  await m.settle(yesterday, 100)
  expect(await store.hget(m.offerKey, 'balance')).toBe('')
  // Reserved today, posted today: recorded on today, and it caps the offer.
  const today = admittedOn(await m.admit())
  await m.settle(today, 100)
  expect(await store.hmget(m.offerKey, 'balance', 'balanceDay')).toEqual(['100', String(dayOf(Date.now()))])
  expect((await m.admit()).code).toBe(AdmitCode.InsufficientRoutable)
})

test("the same post carried on the offer's next reservation: only a reservation of the day records it", async () => {
  const m = await market()
  // Posts wait for the next reservation to carry them (never alone within the test).
  const posts = new PostQueue(store, (id) => m.owners.offer(id).base, 600_000)
  const yesterday = admittedOn(await m.admit(Date.now() - DAY_MS, posts))
  await m.settle(yesterday, 100, posts)
  const carrier = admittedOn(await m.admit(undefined, posts))
  expect(carrier.upstreamBalance).toBeNull()
  expect(await store.hget(m.offerKey, 'balance')).toBe('')
  await m.settle(carrier, 2_000, posts)
  const next = admittedOn(await m.admit(undefined, posts))
  expect(next.upstreamBalance).toBe(2_000 as MicroDiem)
  expect(await store.hmget(m.offerKey, 'balance', 'balanceDay')).toEqual(['2000', String(dayOf(Date.now()))])
  expect(await m.end(next, null)).toBe(true)
  await posts.flush()
})

test('a 402 answered to a reservation made before midnight and voided after it does not empty the new day', async () => {
  const m = await market()
  const yesterday = admittedOn(await m.admit(Date.now() - DAY_MS))
  expect(await m.end(yesterday, 0)).toBe(true)
  expect(await store.hget(m.offerKey, 'balance')).toBe('')
  const today = admittedOn(await m.admit())
  expect(await m.end(today, null)).toBe(true)
})

test("a clear of the day whose post reaches the offer's slot only after midnight does not record its balance", async () => {
  const m = await market()
  const a = admittedOn(await m.admit())
  // The account's side: admitted and cleared today, so the balance holds on today.
  const cleared = await clear(store, m.owners.account(m.accountId), {
    ...meteredClear(a.attemptId, 400, { upstreamBalanceAfter: 100 as MicroDiem }),
    offerApart: true,
  })
  const today = dayOf(Date.now())
  expect(cleared.balanceDay).toBe(today)
  // Its post, sent on as if the offer's slot were a day later: the day it carries is over there.
  const values = postValues(
    a.attemptId,
    a.model,
    { ...cleared, balanceDay: today - 1 },
    100 as MicroDiem,
    a.upstreamGen,
  )
  const posted = await runScript(
    store,
    'post',
    [m.owners.offer(m.offerId).base],
    {
      recordRetentionMs: 60_000,
      offerId: m.offerId,
    },
    values,
  )
  expect(posted).toEqual([1])
  expect(await store.hmget(m.offerKey, 'burned', 'balance')).toEqual(['400', ''])
})
