// A supplier's offers in a market held apart, on a real three-master Redis Cluster: the supplier's
// hash, offers set, upstream key claims and payouts on the market's slot, each offer on its own.
// Over real HTTP: a supplier signs in, posts offers within its limits (a reused upstream key is a
// 409), buyers are served by them at their ask, it sees its fills and earnings, suspension takes
// its offers off the ladder and the reservation refuses them, reinstating brings them back, a
// payout never exceeds what the offers earned (two at once included), and a create left between
// its steps is finished or undone by the reaper. The audit of every slot is clean after each test.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import type OpenAI from 'openai'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { LADDER_VERSION, OfferIndex, putOffer } from '../../src/market/offer-index.ts'
import { MAX_SUPPLIER_OFFERS, MAX_SUPPLIER_OFFERS_POSTED } from '../../src/market/offer-limits.ts'
import { OfferService } from '../../src/market/offers.ts'
import type { Owners } from '../../src/market/two-phase.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { PayoutStore } from '../../src/payouts/store.ts'
import type { Keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { runScript } from '../../src/redis/scripts.ts'
import type { Store } from '../../src/redis/store.ts'
import { adminFetch, keyFetch } from '../helpers/accounts.ts'
import { type HeldApart, startHeldApart } from '../helpers/held-apart.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { postSignIn, siweMessage, supplierNonce, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'

let apart: HeldApart
let stack: TestStack
let store: Store
let keys: Keyspace
let owners: Owners
let offers: OfferService

beforeAll(async () => {
  apart = await startHeldApart('svc-test-suppliers-apart', { sim: { outputTokens: 12 } })
  ;({ stack, store, keys, owners } = apart)
  offers = new OfferService(store, keys, stack.config.masterKey)
})
afterEach(async () => {
  await apart.posted()
  expect(await auditApart(store, keys.prefix)).toEqual([])
})
afterAll(() => apart.stop())

const model = 'svc/llama-3.3-70b'
const messages = [{ role: 'user' as const, content: 'Say something about markets.' }]
const upstreamKey = () => `venice-${randomUUID()}`
const offerRow = (id: string) => store.hgetall(owners.offer(id).offer(id))
const errorCode = async (response: Response) =>
  ((await response.json()) as { error: { code: string } }).error.code

function postOffer(who: TestSupplier, key = upstreamKey(), askCents = 40) {
  return keyFetch(stack, who.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: key, askCents, capacityDiem: '100' },
  })
}

async function posted(who: TestSupplier, askCents = 40): Promise<string> {
  const response = await postOffer(who, upstreamKey(), askCents)
  expect(response.status).toBe(201)
  return ((await response.json()) as { id: string }).id
}

/** An offer of the supplier's posted through the service, as the route posts one, without the upstream's check. */
const created = (who: TestSupplier, askCents: number) =>
  offers.create({
    upstreamBaseUrl: stack.config.upstreamUrl,
    upstreamApiKey: upstreamKey(),
    askCents,
    capacity: 1_000_000 as MicroDiem,
    supplierId: who.supplierId,
    upstreamKeyDigest: randomUUID(),
  })

const changeOffer = (who: TestSupplier, id: string, json: Record<string, unknown>) =>
  keyFetch(stack, who.apiKey, `/v1/supplier/offers/${id}`, { method: 'PATCH', json })
const deleteOffer = (who: TestSupplier, id: string) =>
  keyFetch(stack, who.apiKey, `/v1/supplier/offers/${id}`, { method: 'DELETE' })
const supplierGet = async <T>(who: TestSupplier, path: string) => {
  const response = await keyFetch(stack, who.apiKey, path)
  expect(response.status).toBe(200)
  return (await response.json()) as T
}
const setStatus = (who: TestSupplier, status: 'active' | 'suspended') =>
  adminFetch(stack, `/admin/v1/suppliers/${who.supplierId}`, { method: 'PATCH', json: { status } })

/** A supplier signed in over HTTP (the helper's wait for its key's first use reads the test Redis, not the cluster). */
async function signInSupplier(_stack: TestStack): Promise<TestSupplier> {
  const account = privateKeyToAccount(generatePrivateKey())
  const message = siweMessage(stack, account, await supplierNonce(stack))
  const response = await postSignIn(stack, { message, signature: await account.signMessage({ message }) })
  expect(response.status).toBe(200)
  return { ...((await response.json()) as Omit<TestSupplier, 'account'>), account }
}

const buyer = async () => (await apart.buyer()).client

/** One paid chat, its offer's side posted: what it cost, micro-USDC. */
async function served(client: OpenAI): Promise<number> {
  const { response } = await client.chat.completions.create({ model, messages }).withResponse()
  await apart.posted()
  return Math.round(Number(response.headers.get('x-svc-cost-usdc')) * 1e6)
}

describe("a supplier's offers held apart", () => {
  test('posted on their own slots, listed, claimed and placed on the market slot; one upstream key stands in one offer', async () => {
    const s = await signInSupplier(stack)
    const key = upstreamKey()
    const response = await postOffer(s, key, 41)
    expect(response.status).toBe(201)
    const { id } = (await response.json()) as { id: string }
    const row = await offerRow(id)
    expect(row).toMatchObject({ supplierId: s.supplierId, status: 'active', askCents: '41' })
    expect(row.upstreamKeyDigest).toBe(digestApiKey(key))
    expect(await store.sismember(keys.supplierOffers(s.supplierId), id)).toBe(1)
    expect(await store.hget(keys.upstreamKeys, digestApiKey(key))).toBe(id)
    expect(Number(await store.zscore(keys.ladder, id))).toBe(41 * 1e9 + Number(row.seq))
    expect(await store.hget(keys.supplierOfferStates(s.supplierId), id)).toBe('active')
    expect(await store.zcard(keys.offersListing)).toBe(0)

    const again = await postOffer(s, key, 42)
    expect(again.status).toBe(409)
    expect(await errorCode(again)).toBe('upstream_key_in_use')
    const listed = await supplierGet<{ data: { id: string }[] }>(s, '/v1/supplier/offers')
    expect(listed.data.map((o) => o.id)).toEqual([id])

    // Paused leaves the ladder, active returns; another supplier cannot touch it.
    expect((await changeOffer(s, id, { status: 'paused' })).status).toBe(200)
    expect(await store.zscore(keys.ladder, id)).toBeNull()
    expect(await store.hget(keys.supplierOfferStates(s.supplierId), id)).toBe('paused')
    const other = await signInSupplier(stack)
    expect((await changeOffer(other, id, { status: 'active' })).status).toBe(404)
    expect((await deleteOffer(other, id)).status).toBe(404)
    expect(await store.zscore(keys.ladder, id)).toBeNull()
    expect((await changeOffer(s, id, { status: 'active' })).status).toBe(200)
    expect(await store.zscore(keys.ladder, id)).not.toBeNull()

    // Deleted: off the ladder, its key given back on the market's slot, and claimable again.
    expect((await deleteOffer(s, id)).status).toBe(200)
    expect(await store.zscore(keys.ladder, id)).toBeNull()
    expect(await store.hget(keys.upstreamKeys, digestApiKey(key))).toBeNull()
    const reposted = await postOffer(s, key, 42)
    expect(reposted.status).toBe(201)
    await deleteOffer(s, ((await reposted.json()) as { id: string }).id)
  })

  test("another supplier's offer is a 404 to change or delete, and nothing moves: no listing, no place, no ladder version", async () => {
    const owner = await signInSupplier(stack)
    const prober = await signInSupplier(stack)
    const id = await posted(owner)
    const before = await snapshotKeys(store, keys.prefix)
    for (const refusal of [
      () => changeOffer(prober, id, { askCents: 30 }),
      () => changeOffer(prober, id, { status: 'paused' }),
      () => deleteOffer(prober, id),
    ]) {
      const response = await refusal()
      expect(response.status).toBe(404)
      expect(await errorCode(response)).toBe('offer_not_found')
    }
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
    // Off the ladder for the tests after, which are served by offers of their own.
    expect((await deleteOffer(owner, id)).status).toBe(200)
  })

  test('the same new upstream key posted many times at once stands in exactly one offer', async () => {
    const s = await signInSupplier(stack)
    const key = upstreamKey()
    const responses = await Promise.all(Array.from({ length: 6 }, () => postOffer(s, key)))
    const statuses = responses.map((r) => r.status).sort()
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409])
    const created = responses.find((r) => r.status === 201)!
    const { id } = (await created.json()) as { id: string }
    expect(await store.hget(keys.upstreamKeys, digestApiKey(key))).toBe(id)
    expect(await store.smembers(keys.supplierOffers(s.supplierId))).toEqual([id])
    await deleteOffer(s, id)
  })

  test('a place that read the offer before another change placed it is placed again as the offer stands', async () => {
    const s = await signInSupplier(stack)
    const id = (await created(s, 70)).id
    // Another replica pauses the offer, write and place, between this place's read and its script.
    let between: (() => Promise<unknown>) | null = () =>
      offers.update(id, { supplierId: s.supplierId, status: 'paused' })
    const racing = new Proxy(store, {
      get(target, name) {
        const value = Reflect.get(target, name, target)
        if (name !== 'hmget') return typeof value === 'function' ? value.bind(target) : value
        return async (...args: Parameters<Store['hmget']>) => {
          const row = await target.hmget(...args)
          const step = between
          between = null
          await step?.()
          return row
        }
      },
    })
    await new OfferIndex(racing, keys).place(id)
    expect(between).toBeNull()
    expect((await offerRow(id)).status).toBe('paused')
    expect(await store.zscore(keys.ladder, id)).toBeNull()
    expect(await store.hget(keys.supplierOfferStates(s.supplierId), id)).toBe('paused')
    await offers.remove(id, s.supplierId)
  })

  test('a supplier has at most its limit of offers standing and ever posted; a refusal changes nothing', async () => {
    const s = await signInSupplier(stack)
    const create = () => created(s, 79)
    const ids: string[] = []
    for (let i = 0; i < MAX_SUPPLIER_OFFERS; i++) ids.push((await create()).id)
    const seq = await store.hget(keys.market, 'offerSeq')
    await expect(create()).rejects.toMatchObject({ status: 409, code: 'offer_limit' })
    expect(await store.scard(keys.supplierOffers(s.supplierId))).toBe(MAX_SUPPLIER_OFFERS)
    expect(await store.hget(keys.market, 'offerSeq')).toBe(seq)
    await offers.remove(ids.pop()!, s.supplierId)
    ids.push((await create()).id)
    await Promise.all(ids.map((id) => offers.remove(id, s.supplierId)))

    // Ever posted: deleted ones count (their earnings stay theirs).
    const deleted = MAX_SUPPLIER_OFFERS_POSTED - (await store.scard(keys.supplierOffers(s.supplierId)))
    const filler = Array.from({ length: deleted }, () => randomUUID())
    await store.sadd(keys.supplierOffers(s.supplierId), ...filler)
    await expect(create()).rejects.toMatchObject({ status: 409, code: 'offer_limit' })
    await store.srem(keys.supplierOffers(s.supplierId), ...filler)
  })

  test('buyers are served at its ask; the supplier sees its fills, merged over its offers, and its earnings', async () => {
    const s = await signInSupplier(stack)
    const client = await buyer()
    const first = await posted(s, 31)
    const firstCost = await served(client)
    expect(Number((await offerRow(first)).earned)).toBe(firstCost)
    expect((await changeOffer(s, first, { status: 'paused' })).status).toBe(200)
    const second = await posted(s, 32)
    const secondCost = await served(client)
    expect(Number((await offerRow(second)).earned)).toBe(secondCost)

    type Fills = {
      data: { offerId: string; clearingPriceCents: number; earnedUsdc: string }[]
      nextCursor: string | null
    }
    const page1 = await supplierGet<Fills>(s, '/v1/supplier/fills?limit=1')
    expect(page1.data).toMatchObject([{ offerId: second, clearingPriceCents: 32 }])
    const page2 = await supplierGet<Fills>(s, `/v1/supplier/fills?limit=1&before=${page1.nextCursor}`)
    expect(page2.data).toMatchObject([{ offerId: first, clearingPriceCents: 31 }])
    expect(page2.nextCursor).toBeNull()
    expect(await supplierGet<Fills & { object: string }>(s, '/v1/supplier/fills?before=0-0')).toEqual({
      object: 'list',
      data: [],
      nextCursor: null,
    })
    const all = await supplierGet<Fills>(s, '/v1/supplier/fills')
    expect(all.data.map((f) => Math.round(Number(f.earnedUsdc) * 1e6))).toEqual([secondCost, firstCost])

    const earnings = await supplierGet<{ earnedUsdc: string; fills: number }>(
      s,
      '/v1/supplier/earnings?window=24h',
    )
    expect(Math.round(Number(earnings.earnedUsdc) * 1e6)).toBe(firstCost + secondCost)
    expect(earnings.fills).toBe(2)
    const me = await supplierGet<{ earnedUsdc: string; payableUsdc: string }>(s, '/v1/supplier/me')
    expect(Math.round(Number(me.earnedUsdc) * 1e6)).toBe(firstCost + secondCost)
    expect(me.payableUsdc).toBe(me.earnedUsdc)
    await Promise.all([deleteOffer(s, first), deleteOffer(s, second)])
  })

  test('a key its check told has 0 DIEM left today stands, shown so, but is never sent a request; the next offer serves', async () => {
    const s = await signInSupplier(stack)
    const client = await buyer()
    const empty = upstreamKey()
    stack.sim.keys.get(empty).balanceMicroDiem = 0
    const response = await postOffer(s, empty, 30)
    expect(response.status).toBe(201)
    const zero = (await response.json()) as { id: string; upstreamBalanceDiem: string | null }
    expect(zero.upstreamBalanceDiem).toBe('0.000000')
    expect(await store.zscore(keys.ladder, zero.id)).not.toBeNull()
    const next = await posted(s, 33)
    expect(await served(client)).toBeGreaterThan(0)
    expect(Number((await offerRow(next)).earned)).toBeGreaterThan(0)
    expect(stack.sim.keys.get(empty).requests).toBe(0)
    const listed = await supplierGet<{ data: { id: string; upstreamBalanceDiem: string | null }[] }>(
      s,
      '/v1/supplier/offers',
    )
    expect(listed.data.find((o) => o.id === zero.id)?.upstreamBalanceDiem).toBe('0.000000')
    await Promise.all([deleteOffer(s, zero.id), deleteOffer(s, next)])
  })

  test('suspension takes its offers off the ladder and its reservations are refused; reinstating restores them', async () => {
    const s = await signInSupplier(stack)
    const ids = [await posted(s, 33), await posted(s, 34)]
    const scores = await Promise.all(ids.map((id) => store.zscore(keys.ladder, id)))
    const client = await buyer()
    expect(await served(client)).toBeGreaterThan(0)

    expect((await setStatus(s, 'suspended')).status).toBe(200)
    for (const id of ids) {
      expect(await store.zscore(keys.ladder, id)).toBeNull()
      expect((await offerRow(id)).suspended).toBe('1')
    }
    // A replica whose view still lists the offer is refused on the offer's own slot, nothing held.
    const before = await offerRow(ids[0]!)
    const reserve = (await runScript(store, 'reserve', [owners.offer(ids[0]!).base], {
      attemptId: `held-apart-${randomUUID()}.0`,
      offerId: ids[0]!,
      holdDiem: 1,
      maxCents: 80,
      leaseMs: 60_000,
      accountId: 'nobody',
      now: '',
      recordRetentionMs: 60_000,
    })) as number[]
    expect(Number(reserve[0])).toBe(AdmitCode.KeysBusy)
    expect(await offerRow(ids[0]!)).toEqual(before)
    const refused = await client.chat.completions.create({ model, messages }).catch((e: unknown) => e)
    expect((refused as { status: number }).status).toBe(503)
    const activate = await changeOffer(s, ids[0]!, { status: 'active' })
    expect(activate.status).toBe(403)
    expect(await errorCode(activate)).toBe('supplier_suspended')
    const post = await postOffer(s)
    expect(post.status).toBe(403)

    expect((await setStatus(s, 'active')).status).toBe(200)
    expect(await Promise.all(ids.map((id) => store.zscore(keys.ladder, id)))).toEqual(scores)
    for (const id of ids) expect((await offerRow(id)).suspended).toBeUndefined()
    // The gateway's view of the ladder catches up within its read interval: served again then.
    await until(async () => (await served(client).catch(() => 0)) > 0)
    await Promise.all(ids.map((id) => deleteOffer(s, id)))
  })

  test('creates racing suspensions and reinstatements: each offer ends carrying its supplier status, on the ladder only while active', async () => {
    const s = await signInSupplier(stack)
    const create = () =>
      created(s, 80).catch((error: { code?: string }) => expect(error.code).toBe('supplier_suspended'))
    const flips = async () => {
      for (const status of ['suspended', 'active', 'suspended', 'active', 'suspended'] as const)
        expect((await setStatus(s, status)).status).toBe(200)
    }
    await Promise.all([flips(), ...Array.from({ length: 12 }, create)])
    const settled = async (suspended: boolean) => {
      const ids = await store.smembers(keys.supplierOffers(s.supplierId))
      for (const id of ids) {
        expect((await offerRow(id)).suspended).toBe(suspended ? '1' : undefined)
        expect((await store.zscore(keys.ladder, id)) === null).toBe(suspended)
      }
      return ids
    }
    await settled(true)
    expect((await setStatus(s, 'active')).status).toBe(200)
    const ids = await settled(false)
    await Promise.all(ids.map((id) => offers.remove(id, s.supplierId)))
  })

  test('a payout never exceeds what its offers earned, two asked at once included', async () => {
    const s = await signInSupplier(stack)
    const id = await posted(s, 35)
    const client = await buyer()
    const earned = (await served(client)) + (await served(client))
    const payouts = new PayoutStore(store, keys)
    await expect(payouts.create(s.supplierId, earned + 1, randomUUID(), 1)).rejects.toMatchObject({
      status: 409,
    })
    const share = Math.floor(earned * 0.6)
    const both = await Promise.allSettled([
      payouts.create(s.supplierId, share, randomUUID(), 1),
      payouts.create(s.supplierId, share, randomUUID(), 1),
    ])
    expect(both.filter((r) => r.status === 'fulfilled')).toHaveLength(1)
    const me = await supplierGet<{ payoutPendingUsdc: string; payableUsdc: string }>(s, '/v1/supplier/me')
    expect(Math.round(Number(me.payoutPendingUsdc) * 1e6)).toBe(share)
    expect(Math.round(Number(me.payableUsdc) * 1e6)).toBe(earned - share)
    // Suspended: refused, whatever is payable.
    expect((await setStatus(s, 'suspended')).status).toBe(200)
    await expect(payouts.create(s.supplierId, 1, randomUUID(), 1)).rejects.toMatchObject({ status: 403 })
    expect((await setStatus(s, 'active')).status).toBe(200)
    await deleteOffer(s, id)
  })
})

describe("the ladder's version", () => {
  const version = async () => Number((await store.hget(keys.market, LADDER_VERSION)) ?? 0)
  /** Whether `change` moved the version; `change` asserts it went through. */
  const moves = async (change: () => Promise<void>) => {
    const before = await version()
    await change()
    return (await version()) > before
  }
  const ok = async (response: Promise<Response>) => expect((await response).status).toBeLessThan(300)

  test("moves with each change of an offer's standing, and not with a paid request's steps", async () => {
    const s = await signInSupplier(stack)
    let id = ''
    expect(
      await moves(async () => {
        id = await posted(s, 41)
      }),
    ).toBe(true)
    expect(await moves(() => ok(changeOffer(s, id, { askCents: 42 })))).toBe(true)
    expect(await moves(() => ok(changeOffer(s, id, { capacityDiem: '90' })))).toBe(true)
    // The in-flight cap is the operator's to set.
    expect(
      await moves(async () => {
        await offers.update(id, { maxInFlight: 7 })
      }),
    ).toBe(true)
    expect(await moves(() => ok(changeOffer(s, id, { status: 'paused' })))).toBe(true)
    expect(await moves(() => ok(changeOffer(s, id, { status: 'active' })))).toBe(true)
    expect(await moves(() => ok(setStatus(s, 'suspended')))).toBe(true)
    expect(await moves(() => ok(setStatus(s, 'active')))).toBe(true)
    // A reservation, its hold, the clear and the post (the request waits for its offer's side).
    const client = await buyer()
    expect(await moves(async () => expect(await served(client)).toBeGreaterThan(0))).toBe(false)
    expect(await moves(() => ok(deleteOffer(s, id)))).toBe(true)
  })
})

describe('a create left between its steps', () => {
  const index = () => new OfferIndex(store, keys)

  test('listed but never written: skipped by the audit, then undone by the reaper, its upstream key given back', async () => {
    const s = await signInSupplier(stack)
    const id = randomUUID()
    const digest = digestApiKey(upstreamKey())
    expect(Number((await index().list(id, s.supplierId, digest))[0])).toBe(1)
    expect(await auditApart(store, keys.prefix)).toEqual([])
    expect(await index().finishListings(100, 0)).toBe(1)
    expect(await offerRow(id)).toMatchObject({ status: 'deleted', supplierId: s.supplierId })
    expect(await store.hget(keys.upstreamKeys, digest)).toBeNull()
    expect(await store.hget(keys.supplierOfferStates(s.supplierId), id)).toBe('deleted')
    expect(await store.zcard(keys.offersListing)).toBe(0)
    // The create's write, should it come late after all, finds the id taken.
    const late = await putOffer(store, keys, id, { mode: 'create', askCents: 40, status: 'active', seq: '1' })
    expect(Number(late[0])).toBe(-1)
    expect(await store.zscore(keys.ladder, id)).toBeNull()
  })

  test('written but never placed: placed by the reaper as it stands', async () => {
    const s = await signInSupplier(stack)
    const id = randomUUID()
    const digest = digestApiKey(upstreamKey())
    const [, seq] = await index().list(id, s.supplierId, digest)
    await putOffer(store, keys, id, {
      mode: 'create',
      upstreamBaseUrl: stack.config.upstreamUrl,
      upstreamKeyEnc: 'v1:sealed',
      askCents: 77,
      capacity: 1_000_000,
      maxInFlight: 4,
      status: 'active',
      supplierId: s.supplierId,
      upstreamKeyDigest: digest,
      seq: String(seq),
    })
    expect(await store.zscore(keys.ladder, id)).toBeNull()
    expect(await index().finishListings(100, 0)).toBe(1)
    expect(Number(await store.zscore(keys.ladder, id))).toBe(77 * 1e9 + Number(seq))
    expect(await store.hget(keys.supplierOfferStates(s.supplierId), id)).toBe('active')
    expect(await store.hget(keys.upstreamKeys, digest)).toBe(id)
    await offers.remove(id, s.supplierId)
    expect(await store.hget(keys.upstreamKeys, digest)).toBeNull()
  })

  test('deleted on its slot but never placed: the key is claimable again at once', async () => {
    const s = await signInSupplier(stack)
    const key = upstreamKey()
    const response = await postOffer(s, key)
    const { id } = (await response.json()) as { id: string }
    await putOffer(store, keys, id, { mode: 'delete' })
    expect(await store.hget(keys.upstreamKeys, digestApiKey(key))).toBe(id)
    const again = await postOffer(s, key)
    expect(again.status).toBe(201)
    expect(await store.zscore(keys.ladder, id)).toBeNull()
    await deleteOffer(s, ((await again.json()) as { id: string }).id)
  })

  test('a change written but never placed: placed by the reaper as the offer stands', async () => {
    const s = await signInSupplier(stack)
    const id = await posted(s, 78)
    await index().touch(id)
    await putOffer(store, keys, id, { mode: 'update', status: 'paused', supplierId: s.supplierId })
    expect(await store.zscore(keys.ladder, id)).not.toBeNull()
    expect(await index().finishListings(100, 0)).toBe(1)
    expect(await store.zscore(keys.ladder, id)).toBeNull()
    expect(await store.hget(keys.supplierOfferStates(s.supplierId), id)).toBe('paused')
    await deleteOffer(s, id)
  })
})

describe('the audit of suppliers held apart', () => {
  test("names an offer missing from its supplier's set, payouts past earnings, and a key claimed by a deleted offer", async () => {
    const s = await signInSupplier(stack)
    const key = upstreamKey()
    const response = await postOffer(s, key, 79)
    const { id } = (await response.json()) as { id: string }
    const subject = `supplier ${s.supplierId}`
    await store.srem(keys.supplierOffers(s.supplierId), id)
    await store.hset(keys.supplier(s.supplierId), 'pending', 1)
    await putOffer(store, keys, id, { mode: 'delete' })
    expect(await auditApart(store, keys.prefix)).toEqual([
      { subject, problem: `offer ${id} names it but is not in its offers` },
      { subject, problem: "paid out and pending 1 exceed its offers' earned 0" },
      {
        subject: `upstream key ${digestApiKey(key).slice(0, 12)}`,
        problem: `claimed by offer ${id}, which is deleted`,
      },
    ])
    await store.sadd(keys.supplierOffers(s.supplierId), id)
    await store.hset(keys.supplier(s.supplierId), 'pending', 0)
    await deleteOffer(s, id)
  })
})
