// A replica's view of a ladder held apart, on a real three-master Redis Cluster: it checks the
// ladder's version and reads the ladder and its offers again only when the version moved or its
// full-read period (longer with more replicas seen) passed; between full reads the reservations'
// replies keep it current: an offer's room, routable capacity and ask, and when a cooling offer is
// back.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import type { Admission } from '../../src/market/admission.ts'
import { admitCheapest } from '../../src/market/admit-from-view.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { LadderView } from '../../src/market/ladder-view.ts'
import { OfferIndex } from '../../src/market/offer-index.ts'
import type { AdmitRefusal } from '../../src/market/refusal-errors.ts'
import { FULL_READ_MAX_MS, fullReadPeriodMs } from '../../src/market/replicas.ts'
import { marketSteps } from '../../src/market/steps.ts'
import { type Owners, ownerKeyspaces, releaseApart } from '../../src/market/two-phase.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { dayOf } from '../../src/records/days.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { admitRequest, apartOfferRow, seedAccount } from '../helpers/market.ts'
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.ts'
import { until, untilRedisPasses } from '../helpers/wait.ts'

let cluster: RedisCluster
let store: Store
/** Every market a test made, for the audit after it. */
const markets: string[] = []

beforeAll(async () => {
  cluster = await startRedisCluster()
  store = createStore(cluster.url, { name: 'svc-test-ladder-view' })
  await store.whenReady(15_000)
})
afterEach(async () => {
  for (const prefix of markets.splice(0)) expect(await auditApart(store, prefix)).toEqual([])
})
afterAll(() => {
  store.close()
  cluster.stop()
})

/** A market of its own for one test: its keyspace held apart, its owners and its index. */
function market() {
  const prefix = `t${randomBytes(4).toString('hex')}:{v}`
  markets.push(prefix)
  const keys = keyspace(prefix, 'apart')
  const owners = ownerKeyspaces(prefix)
  return { keys, owners, index: new OfferIndex(store, keys), seq: 0 }
}
type Market = ReturnType<typeof market>

/** An offer written on its own slot, then placed on the ladder as a create places it. */
async function post(m: Market, ask: number, capacity = 5_000_000, maxInFlight = 1_000): Promise<string> {
  const id = randomUUID()
  await store.hset(m.owners.offer(id).offer(id), {
    ...apartOfferRow(id, ask, capacity, maxInFlight),
    seq: ++m.seq,
  })
  await m.index.place(id)
  return id
}

/** The store, counting the offer rows it reads and the reservations asked of each offer. */
function counting(owners: Owners) {
  const calls = { rows: 0, reserves: new Map<string, number>() }
  const counted: Store = {
    ...store,
    hmget: ((...args: Parameters<Store['hmget']>) => {
      calls.rows++
      return store.hmget(...args)
    }) as Store['hmget'],
    sendScript(name, keys, argv) {
      if (name === 'reserve')
        calls.reserves.set(String(argv[1]), (calls.reserves.get(String(argv[1])) ?? 0) + 1)
      return store.sendScript(name, keys, argv)
    },
  }
  return { counted, calls, reservesOn: (id: string) => calls.reserves.get(id) ?? 0, owners }
}

/** An account on its shard with room for many holds. */
async function buyer(owners: Owners): Promise<string> {
  const accountId = `acct_${randomBytes(12).toString('hex')}`
  await seedAccount({ store, keys: owners.account(accountId) }, 100_000_000, 50, accountId)
  return accountId
}

/** Admits through the view, holding `holdDiem`; the admissions are kept for release. */
function admitting(m: Market, counted: Store, view: LadderView, accountId: string, held: Admission[]) {
  return async (holdDiem = 1_000): Promise<Admission | AdmitRefusal> => {
    const req = { ...admitRequest(accountId, { holdDiem: holdDiem as MicroDiem }), maxCents: 50 }
    const result = await admitCheapest(counted, m.owners, view, req)
    if (result.code === AdmitCode.Admitted) held.push(result as Admission)
    return result
  }
}

/** Releases every admission: nothing stays held for the audit. */
async function releaseAll(m: Market, held: Admission[]): Promise<void> {
  for (const a of held.splice(0)) {
    const who = { accountId: a.accountId, offerId: a.offerId, model: a.model }
    const failure = {
      attemptId: a.attemptId,
      errorCode: 'upstream_error',
      cooldownMs: 0,
      upstreamBalance: null,
    }
    expect(await releaseApart(store, m.owners, who, failure)).toBe(true)
  }
}

/** A view read once over the market's offers, and a buyer admitting through it. */
async function readView(m: Market) {
  const { counted, reservesOn } = counting(m.owners)
  const view = new LadderView(counted, m.keys, m.owners)
  await view.refresh()
  const held: Admission[] = []
  const admit = admitting(m, counted, view, await buyer(m.owners), held)
  return { counted, reservesOn, view, held, admit }
}

const offerOf = (result: Admission | AdmitRefusal) => (result as Admission).offerId

describe("a view checked against the ladder's version", () => {
  test('reads no offer while the version stays, and every offer once a place moved it', async () => {
    const m = market()
    const dear = await post(m, 45)
    const { counted, calls } = counting(m.owners)
    let now = Date.now()
    const view = new LadderView(counted, m.keys, m.owners, () => now)
    // The first check reads in full.
    expect(await view.check()).toBe(true)
    expect(calls.rows).toBe(1)
    // The version stayed: no offer is read, however often it checks within its period.
    for (let i = 0; i < 5; i++) {
      now += 100
      expect(await view.check()).toBe(false)
    }
    // Written on the offer's own slot alone (as a reservation writes): not a reason to read.
    await store.hset(m.owners.offer(dear).offer(dear), 'held', 1)
    expect(await view.check()).toBe(false)
    expect(calls.rows).toBe(1)
    // A cheaper offer placed moves the version: the next check reads the ladder and both offers.
    const cheap = await post(m, 40)
    expect(await view.check()).toBe(true)
    expect(calls.rows).toBe(3)
    expect(view.current.map((o) => [o.id, o.ask])).toEqual([
      [cheap, 40],
      [dear, 45],
    ])
    expect(await view.check()).toBe(false)
    expect(calls.rows).toBe(3)
    await store.hset(m.owners.offer(dear).offer(dear), 'held', 0)
  })

  test('a cheaper offer posted is chosen by the next request once the version moved, however long the period', async () => {
    const m = market()
    await post(m, 45)
    const accountId = await buyer(m.owners)
    // Forty replicas seen: the view's full-read period is at its cap.
    const at = Date.now()
    await store.zadd(m.keys.replicas, ...Array.from({ length: 40 }, (_, i) => [at, `replica-${i}`]).flat())
    const steps = marketSteps(store, m.keys)
    const quoted = () => steps.quote(accountId, 1_000 as MicroDiem, 50)
    expect(await quoted()).toEqual({ code: AdmitCode.Admitted, askCents: 45 })
    await post(m, 40)
    await until(async () => ((await quoted()) as { askCents?: number }).askCents === 40)
  })

  test('a refused request checks the version again, and reads offers only once it moved', async () => {
    const m = market()
    // Too small for any request: every request is refused, as a stale view may have caused.
    await post(m, 40, 500)
    const at = Date.now()
    await store.zadd(m.keys.replicas, ...Array.from({ length: 40 }, (_, i) => [at, `replica-${i}`]).flat())
    const { counted, calls } = counting(m.owners)
    const steps = marketSteps(counted, m.keys)
    const accountId = await buyer(m.owners)
    const admit = () => steps.admit(admitRequest(accountId))
    // Refused again and again for longer than the view waits between checks after a refusal: the
    // version stayed, so the offer is read once.
    const start = Date.now()
    while (Date.now() - start < 500) expect((await admit()).code).toBe(AdmitCode.InsufficientRoutable)
    expect(calls.rows).toBe(1)
    // An offer placed moves the version: a request after the next check is served there.
    const roomy = await post(m, 45)
    let served: Admission | null = null
    await until(async () => {
      const result = await admit()
      if (result.code === AdmitCode.Admitted) served = result as Admission
      return served !== null
    })
    expect(served!.offerId).toBe(roomy)
    expect(calls.rows).toBe(3)
    await releaseAll(m, [served!])
  })

  test('the full-read period grows with the replicas seen, up to its cap', async () => {
    expect([0, 1, 4, 12, 30, 31, 500].map(fullReadPeriodMs)).toEqual([
      1_000,
      1_000,
      4_000,
      12_000,
      30_000,
      FULL_READ_MAX_MS,
      FULL_READ_MAX_MS,
    ])
    const m = market()
    await post(m, 45)
    const { counted, calls } = counting(m.owners)
    let now = Date.now()
    const view = new LadderView(counted, m.keys, m.owners, () => now, 10_000)
    // Four replicas seen lately, and one silent for longer than a replica counts as seen.
    await store.zadd(m.keys.replicas, now, 'a', now, 'b', now, 'c', now, 'd', now - 60_000, 'gone')
    expect(await view.check()).toBe(true)
    expect(view.fullReadPeriod).toBe(4_000)
    // Within the period the version alone is read; past it, the view reads in full again.
    now += 3_999
    expect(await view.check()).toBe(false)
    expect(calls.rows).toBe(1)
    now += 2
    expect(await view.check()).toBe(true)
    expect(calls.rows).toBe(2)
    // A hundred replicas: the period stops at its cap.
    await store.zadd(m.keys.replicas, ...Array.from({ length: 100 }, (_, i) => [now, `more-${i}`]).flat())
    expect(await view.check()).toBe(false)
    expect(view.fullReadPeriod).toBe(FULL_READ_MAX_MS)
  })
})

describe("a view kept by the reservations' replies", () => {
  test("an offer without the routable for a request after this view's reservations is not tried", async () => {
    const m = market()
    // Room for two holds of 10,000.
    const small = await post(m, 40, 25_000)
    const roomy = await post(m, 45)
    const { counted, reservesOn, view, held, admit } = await readView(m)
    expect(offerOf(await admit(10_000))).toBe(small)
    expect(view.current[0]).toMatchObject({ id: small, routable: 15_000 })
    expect(offerOf(await admit(10_000))).toBe(small)
    expect(view.current[0]).toMatchObject({ id: small, routable: 5_000 })
    // The third does not fit what the second's reply said is left: the roomy offer takes it, and
    // the small one is asked nothing.
    expect(offerOf(await admit(10_000))).toBe(roomy)
    expect(reservesOn(small)).toBe(2)
    // A smaller request still fits there.
    expect(offerOf(await admit(5_000))).toBe(small)
    expect(reservesOn(small)).toBe(3)
    // A hold the account refuses voids its reservation: what the reply counted out comes back.
    const poor = `acct_${randomBytes(12).toString('hex')}`
    await seedAccount({ store, keys: m.owners.account(poor) }, 1, 50, poor)
    const refused = await admitCheapest(counted, m.owners, view, {
      ...admitRequest(poor, { holdDiem: 5_000 as MicroDiem }),
      maxCents: 50,
    })
    expect(refused.code).toBe(AdmitCode.InsufficientBalance)
    expect(view.current[1]).toMatchObject({ id: roomy, routable: 4_990_000 })
    await releaseAll(m, held)
  })

  test('a refusal for capacity says what the offer has left: the view takes it', async () => {
    const m = market()
    const worn = await post(m, 40, 25_000)
    const roomy = await post(m, 45)
    const { reservesOn, view, held, admit } = await readView(m)
    // Its upstream balance reported low since the view was read: 5,000 left.
    await store.hset(m.owners.offer(worn).offer(worn), 'balance', 5_000, 'balanceDay', dayOf(Date.now()))
    expect(offerOf(await admit(10_000))).toBe(roomy)
    expect(view.current[0]).toMatchObject({ id: worn, routable: 5_000 })
    expect(offerOf(await admit(10_000))).toBe(roomy)
    expect(reservesOn(worn)).toBe(1)
    expect(offerOf(await admit(5_000))).toBe(worn)
    expect(view.current[0]).toMatchObject({ id: worn, routable: 0 })
    await releaseAll(m, held)
  })

  test("a reservation that finds a new ask puts the offer in its ask's place in the view's order", async () => {
    const m = market()
    const first = await post(m, 45)
    const second = await post(m, 46)
    const { view, held, admit } = await readView(m)
    // Repriced on its own slot behind the view's back (no place: the version did not move).
    await store.hset(m.owners.offer(first).offer(first), 'askCents', 48)
    expect(await admit()).toMatchObject({ offerId: first, askCents: 48 })
    expect(view.current.map((o) => [o.id, o.ask])).toEqual([
      [second, 46],
      [first, 48],
    ])
    expect(await admit()).toMatchObject({ offerId: second, askCents: 46 })
    await releaseAll(m, held)
  })

  test('a cooling offer is passed over until its cooldown ends, then tried again without a full read; a paused one until the next', async () => {
    const m = market()
    const cooling = await post(m, 40)
    const next = await post(m, 45)
    const { counted, calls, reservesOn } = counting(m.owners)
    let now = Date.now()
    const view = new LadderView(counted, m.keys, m.owners, () => now)
    expect(await view.check()).toBe(true)
    const held: Admission[] = []
    const admit = admitting(m, counted, view, await buyer(m.owners), held)
    // Cooled down since the view was read (as a failed request's void cools it), by the master's clock.
    const [seconds, micros] = await store.time()
    const back = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000) + 300
    await store.hset(m.owners.offer(cooling).offer(cooling), 'cooldownUntil', back)
    expect(offerOf(await admit())).toBe(next)
    expect(view.current[0]).toMatchObject({ id: cooling, live: false, cooldownUntil: back })
    // Passed over while it cools: not asked again.
    expect(offerOf(await admit())).toBe(next)
    expect(reservesOn(cooling)).toBe(1)
    // Its cooldown over, by the view's clock and the master's: live again, and chosen.
    now = back + 1
    await untilRedisPasses(store, back)
    expect(view.current[0]).toMatchObject({ id: cooling, live: true })
    expect(offerOf(await admit())).toBe(cooling)
    expect(await view.check()).toBe(false)
    // Paused on its own slot before its place: refused without a time to come back, it is passed
    // over until the view reads it again.
    await store.hset(m.owners.offer(cooling).offer(cooling), 'status', 'paused')
    expect(offerOf(await admit())).toBe(next)
    now += 10_000_000
    await store.hset(m.owners.offer(cooling).offer(cooling), 'status', 'active')
    expect(offerOf(await admit())).toBe(next)
    expect(reservesOn(cooling)).toBe(3)
    // Its place moves the version: read again, it is chosen.
    await m.index.place(cooling)
    expect(await view.check()).toBe(true)
    expect(offerOf(await admit())).toBe(cooling)
    expect(calls.rows).toBe(4)
    await releaseAll(m, held)
  })

  test("room another replica's requests freed is found: what a reply said of an offer holds for a second, then the offer is asked again", async () => {
    const m = market()
    const single = await post(m, 40, 5_000_000, 1)
    const roomy = await post(m, 45)
    const { counted, calls, reservesOn } = counting(m.owners)
    let now = Date.now()
    const view = new LadderView(counted, m.keys, m.owners, () => now)
    expect(await view.check()).toBe(true)
    const mine: Admission[] = []
    const admit = admitting(m, counted, view, await buyer(m.owners), mine)
    // Its one slot taken: the reply says it is full.
    const first = await admit()
    expect(offerOf(first)).toBe(single)
    expect(view.current[0]).toMatchObject({ id: single, full: true })
    // Ended as another replica's request ends: this view is not told.
    await releaseAll(m, mine.splice(0))
    expect(offerOf(await admit())).toBe(roomy)
    expect(reservesOn(single)).toBe(1)
    // A second on: asked again, found with room, and taken.
    now += 1_000
    expect(offerOf(await admit())).toBe(single)
    expect(reservesOn(single)).toBe(2)
    // Full again for as long as the reply is fresh; past it, asked once and refused, and the next
    // request goes by that answer.
    expect(offerOf(await admit())).toBe(roomy)
    now += 1_000
    expect(offerOf(await admit())).toBe(roomy)
    expect(reservesOn(single)).toBe(3)
    expect(offerOf(await admit())).toBe(roomy)
    expect(reservesOn(single)).toBe(3)
    // None of it read the offers again.
    expect(calls.rows).toBe(2)
    await releaseAll(m, mine)
  })
})
