// Paid requests through the gateway with its market held apart, on a real three-master Redis
// Cluster: each account's keys under its shard's tag, each offer under its own, the ladder and the
// key records on the market's, and every step of a request a script on one slot (reserve on the
// offer, hold on the account; clear, then post; release, then void). The openai SDK as the client,
// the simulated supplier as the upstream. Money stays exact across the pairs: what the account paid
// is what the offer earned plus the fee, the audit of every pair is clean after each test, and a
// failed or refused attempt leaves no reservation behind.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import OpenAI from 'openai'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import { ApiKeyStore } from '../../src/accounts/key-store.ts'
import type { Admission } from '../../src/market/admission.ts'
import { auditApart } from '../../src/market/audit-apart.ts'
import { OfferService } from '../../src/market/offers.ts'
import { marketSteps } from '../../src/market/steps.ts'
import { type Owners, ownerKeyspaces } from '../../src/market/two-phase.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import type { Store } from '../../src/redis/store.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { type HeldApart, startHeldApart } from '../helpers/held-apart.ts'
import { admitRequest } from '../helpers/market.ts'
import { saveKeys } from '../helpers/saved-keys.ts'
import { freePort, type TestStack, testPrefix } from '../helpers/stack.ts'
import { retrieveWhenDone } from '../helpers/video.ts'
import { until } from '../helpers/wait.ts'

let apart: HeldApart
let stack: TestStack
let store: Store
let keys: Keyspace
let owners: Owners
let offerService: OfferService

beforeAll(async () => {
  apart = await startHeldApart('svc-test-held-apart', {
    sim: { outputTokens: 12, videoJobMs: 100 },
    env: { SVC_STATS_MIN_REQUESTS: '1' },
  })
  ;({ stack, store, keys, owners } = apart)
  offerService = new OfferService(store, keys, stack.config.masterKey)
})
afterEach(async () => {
  await apart.posted()
  expect(await auditApart(store, keys.prefix)).toEqual([])
})
afterAll(() => apart.stop())

const messages = [{ role: 'user' as const, content: 'Say something about markets.' }]
const model = 'svc/llama-3.3-70b'

/** An offer posted as the operator posts one: under its own tag, listed and placed on the market's slot. */
async function postOffer(ask: number, upstreamBaseUrl = stack.sim.url): Promise<string> {
  const offer = await offerService.create({
    upstreamBaseUrl,
    upstreamApiKey: `sim-key-${randomUUID()}`,
    askCents: ask,
    capacity: 1_000_000_000 as MicroDiem,
    maxInFlight: 100,
  })
  return offer.id
}

const removeOffer = (id: string) => offerService.remove(id)

const buyer = (maxPriceCents?: number) => apart.buyer(maxPriceCents)

async function marketTotals(): Promise<{ spentUsdc: string; earnedUsdc: string }> {
  const response = await fetch(`${stack.url}/admin/v1/market`, {
    headers: { authorization: `Bearer ${stack.config.adminToken}` },
  })
  expect(response.status).toBe(200)
  return (await response.json()) as { spentUsdc: string; earnedUsdc: string }
}

/** An offer's row once no clear waits on its side (the gateway posts it a moment after answering). */
const offerRow = async (id: string) => {
  await apart.posted()
  return store.hgetall(owners.offer(id).offer(id))
}
const accountRow = (id: string) => store.hgetall(keys.account(id))

/** A buyer's POSTs to the gateway, as a client without an SDK sends them. */
const sender = (apiKey: string) => (path: string, json: unknown) =>
  fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(json),
  })
const slotOf = async (key: string) => Number(await store.call('CLUSTER', 'KEYSLOT', key))

describe('the request path held apart', () => {
  test('a buffered chat clears at the cheapest offer: the account pays exactly what the offer earns plus the fee', async () => {
    const cheap = await postOffer(36)
    const dear = await postOffer(44)
    const b = await buyer()
    // The two sides of this request live on different slots: no one script could reach both.
    expect(await slotOf(keys.account(b.accountId))).not.toBe(await slotOf(owners.offer(cheap).offer(cheap)))
    const before = await accountRow(b.accountId)
    const totalsBefore = await marketTotals()
    const { data, response } = await b.client.chat.completions.create({ model, messages }).withResponse()
    expect(data.choices[0]!.message.content?.length).toBeGreaterThan(0)
    const cost = Number(response.headers.get('x-svc-cost-usdc')) * 1e6
    const after = await accountRow(b.accountId)
    expect(Number(before.confirmed) - Number(after.confirmed)).toBe(cost)
    expect(Number(after.spent)).toBe(cost)
    expect(Number(after.held)).toBe(0)
    const offer = await offerRow(cheap)
    expect(Number(offer.earned) + Number(offer.fees ?? 0)).toBe(cost)
    expect(Number(offer.held)).toBe(0)
    expect(Number(offer.inflight)).toBe(0)
    expect(Number((await offerRow(dear)).earned)).toBe(0)
    // The operator's totals, summed over the account shards the clears kept them on.
    const totals = await marketTotals()
    expect(Math.round((Number(totals.spentUsdc) - Number(totalsBefore.spentUsdc)) * 1e6)).toBe(cost)
    expect(Math.round((Number(totals.earnedUsdc) - Number(totalsBefore.earnedUsdc)) * 1e6)).toBe(
      Number(offer.earned),
    )
    // The key's lastUsedAt, on the market's slot, is written as the request is admitted.
    const digest = digestApiKey(b.apiKey)
    await until(async () => (await store.hget(keys.apiKey(digest), 'lastUsedAt')) !== null)
    await Promise.all([removeOffer(cheap), removeOffer(dear)])
  })

  test('a stream clears once its usage is in; the reservation is posted with what the account paid', async () => {
    const offerId = await postOffer(40)
    const b = await buyer()
    const stream = await b.client.chat.completions.create({ model, messages, stream: true })
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
    expect(text.length).toBeGreaterThan(0)
    const account = await accountRow(b.accountId)
    const offer = await offerRow(offerId)
    expect(Number(account.spent)).toBeGreaterThan(0)
    expect(Number(account.held)).toBe(0)
    expect(Number(offer.earned) + Number(offer.fees ?? 0)).toBe(Number(account.spent))
    expect(Number(offer.inflight)).toBe(0)
    await removeOffer(offerId)
  })

  test.each(['account', 'offer'] as const)(
    "a stream whose %s's side the store lost mid-flight (its master failed over) is charged what it was told, and posted on the offer",
    async (side) => {
      const offerId = await postOffer(40)
      const b = await buyer()
      // That side's slot as it was before the request: what a replica that never got the step has.
      const slot = side === 'account' ? owners.account(b.accountId) : owners.offer(offerId)
      const before = await saveKeys(store, slot.prefix)
      stack.sim.settings.holdFirstToken = true
      const stream = await b.client.chat.completions.create({ model, messages, stream: true })
      const frames: unknown[] = []
      const reading = (async () => {
        for await (const chunk of stream) frames.push(chunk)
      })()
      await until(async () => Number((await accountRow(b.accountId)).held) > 0)
      await before.restore()
      stack.sim.releaseFirstTokens()
      await reading
      const cost = frames.at(-1) as { costUsdc: string; supportReference: string }
      const charged = Math.round(Number(cost.costUsdc) * 1e6)
      expect(charged).toBeGreaterThan(0)
      expect(await accountRow(b.accountId)).toMatchObject({ spent: String(charged), held: '0' })
      const offer = await offerRow(offerId)
      expect(Number(offer.earned) + Number(offer.fees ?? 0)).toBe(charged)
      expect(offer).toMatchObject({ held: '0', inflight: '0' })
      const attemptId = `${cost.supportReference}.1`
      const attempt = await attemptRecord(store, owners.account(b.accountId).attempt(attemptId))
      expect(attempt).toMatchObject({ state: 'cleared', costUsdc: String(charged) })
      expect(attempt.lateClear).toBe(side === 'account' ? 'lost' : undefined)
      const reservation = await store.hgetall(owners.offer(offerId).reservation(attemptId))
      expect(reservation).toMatchObject({ state: 'posted' })
      expect(reservation.lost).toBe(side === 'offer' ? '1' : undefined)
      await removeOffer(offerId)
    },
  )

  test('a supplier that fails falls forward to the next offer; its reservation is voided, nothing held on it', async () => {
    const dead = await postOffer(32, 'http://127.0.0.1:1')
    const live = await postOffer(42)
    const b = await buyer()
    const { response } = await b.client.chat.completions.create({ model, messages }).withResponse()
    const cost = Number(response.headers.get('x-svc-cost-usdc')) * 1e6
    const failed = await offerRow(dead)
    expect(Number(failed.held)).toBe(0)
    expect(Number(failed.inflight)).toBe(0)
    expect(Number(failed.earned)).toBe(0)
    expect(Number(failed.cooldownUntil)).toBeGreaterThan(0)
    const served = await offerRow(live)
    expect(Number(served.earned) + Number(served.fees ?? 0)).toBe(cost)
    expect(Number((await accountRow(b.accountId)).spent)).toBe(cost)
    // The request's record, read from the account's own shard: both attempts, the second served.
    const reference = response.headers.get('x-svc-support-reference')!
    const record = await fetch(`${stack.url}/v1/agent/requests/${reference}`, {
      headers: { authorization: `Bearer ${b.apiKey}` },
    })
    expect(record.status).toBe(200)
    const view = (await record.json()) as {
      status: string
      costUsdc: string
      attempts: { offerId: string }[]
    }
    expect(view.status).toBe('completed')
    expect(Number(view.costUsdc) * 1e6).toBe(cost)
    expect(view.attempts.map((a) => a.offerId)).toEqual([dead, live])
    await Promise.all([removeOffer(dead), removeOffer(live)])
  })

  test("a buyer's max below every offer is refused as no eligible supply, with nothing held or reserved", async () => {
    const offerId = await postOffer(60)
    const b = await buyer(40)
    const before = await accountRow(b.accountId)
    const error = await b.client.chat.completions.create({ model, messages }).catch((e) => e)
    expect(error).toBeInstanceOf(OpenAI.APIError)
    expect(error.code).toBe('no_eligible_supply')
    // The refusal is recorded on the account's own shard.
    const reference = error.headers.get('x-svc-support-reference')
    const record = await fetch(`${stack.url}/v1/agent/requests/${reference}`, {
      headers: { authorization: `Bearer ${b.apiKey}` },
    })
    expect(((await record.json()) as { status: string }).status).toBe('refused')
    expect(await accountRow(b.accountId)).toMatchObject({ confirmed: before.confirmed, held: '0' })
    const offer = await offerRow(offerId)
    expect(offer).toMatchObject({ held: '0', inflight: '0' })
    await removeOffer(offerId)
  })

  test('a key revoked after this replica resolved it is refused, with nothing held or reserved', async () => {
    const offerId = await postOffer(40)
    const b = await buyer()
    await b.client.chat.completions.create({ model, messages })
    const spent = (await accountRow(b.accountId)).spent
    const [keyId] = await store.hkeys(keys.accountKeys(b.accountId))
    await new ApiKeyStore(store, keys).revoke(b.accountId, keyId!)
    const error = await b.client.chat.completions.create({ model, messages }).catch((e) => e)
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError)
    expect((await accountRow(b.accountId)).spent).toBe(spent)
    expect(await offerRow(offerId)).toMatchObject({ held: '0', inflight: '0' })
    await removeOffer(offerId)
  })

  test("a replica killed with a clear's post queued: the account's charge stands, and a replica's reaper posts it once its lease runs out", async () => {
    const offerId = await postOffer(38)
    const b = await buyer()
    // A replica of its own, whose posts wait for a reservation that never comes to carry them.
    const port = await freePort()
    const replica = Bun.spawn([process.execPath, 'src/main.ts', 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        PORT: String(port),
        HOST: '127.0.0.1',
        REDIS_URL: apart.cluster.url,
        SVC_REDIS_PREFIX: stack.config.redisPrefix,
        SVC_REDIS_LAYOUT: 'apart',
        SVC_ADMIN_TOKEN: stack.config.adminToken,
        SVC_MASTER_KEY: Buffer.from(stack.config.masterKey).toString('hex'),
        SVC_UPSTREAM_URL: stack.sim.url,
        // Its catalog sync prices the video models as the stack's does.
        SVC_UPSTREAM_API_KEY: stack.config.upstreamApiKey!,
        // Renewed while its call runs, the lease runs out only after the kill: long enough that a
        // first request stalled on a busy machine is not reaped before its clear.
        SVC_LEASE_SECONDS: '15',
        SVC_POST_WITHIN_MS: '600000',
        LOG_LEVEL: 'silent',
      },
      stdout: 'ignore',
      stderr: 'inherit',
    })
    try {
      const url = `http://127.0.0.1:${port}`
      await until(async () => (await fetch(`${url}/readyz`).catch(() => null))?.ok === true, 50)
      const client = new OpenAI({ apiKey: b.apiKey, baseURL: `${url}/v1`, maxRetries: 0 })
      const { response } = await client.chat.completions.create({ model, messages }).withResponse()
      const cost = Number(response.headers.get('x-svc-cost-usdc')) * 1e6
      expect(cost).toBeGreaterThan(0)
      expect(Number((await accountRow(b.accountId)).spent)).toBe(cost)
      // Answered and charged; the offer's side waits in the replica, killed before it goes out.
      const queued = await store.hgetall(owners.offer(offerId).offer(offerId))
      expect([queued.inflight, queued.earned]).toEqual(['1', '0'])
      replica.kill('SIGKILL')
      await replica.exited
      const offer = await offerRow(offerId)
      expect([offer.held, offer.inflight]).toEqual(['0', '0'])
      expect(Number(offer.earned) + Number(offer.fees ?? 0)).toBe(
        Number((await accountRow(b.accountId)).spent),
      )
      const day = new Date(Number((await store.time())[0]) * 1000).toISOString().slice(0, 10)
      expect(await store.hget(keys.offerStatsDay(offerId, day), 'llama-3.3-70b')).toBe('1')
    } finally {
      replica.kill('SIGKILL')
      // Off the ladder whatever happened: the next tests' requests go to their own offers.
      await removeOffer(offerId)
    }
  }, 60_000)

  test("an attempt whose replica stopped after admission is finished by a replica's reaper: the hold comes back, the reservation is voided", async () => {
    const offerId = await postOffer(40)
    const b = await buyer()
    const [apiKeyId] = await store.hkeys(keys.accountKeys(b.accountId))
    // Admitted by a replica that then stops: no clear, no release, no renewal.
    const admitted = await marketSteps(store, keys).admit(
      admitRequest(b.accountId, { apiKeyId: apiKeyId!, holdDiem: 50_000 as never, leaseMs: 100 }),
    )
    expect(admitted.code).toBe(AdmitCode.Admitted)
    const { attemptId } = admitted as Admission
    expect((admitted as Admission).offerId).toBe(offerId)
    expect(Number((await accountRow(b.accountId)).held)).toBeGreaterThan(0)
    await until(
      async () => (await store.hget(owners.offer(offerId).reservation(attemptId), 'state')) === 'voided',
    )
    expect((await attemptRecord(store, owners.account(b.accountId).attempt(attemptId))).state).toBe('reaped')
    expect(await accountRow(b.accountId)).toMatchObject({ held: '0', spent: '0', inflight: '0' })
    expect(await offerRow(offerId)).toMatchObject({ held: '0', inflight: '0' })
    await removeOffer(offerId)
  })

  test("/metrics counts the attempts held apart: each reservation's lease, on its offer's slot", async () => {
    const scrape = async () => {
      const response = await fetch(`${stack.url}/metrics`, {
        headers: { authorization: `Bearer ${stack.config.adminToken}` },
      })
      const line = (await response.text()).split('\n').find((l) => l.startsWith('svc_holds_outstanding '))
      return Number(line?.split(' ')[1])
    }
    const offerId = await postOffer(40)
    const b = await buyer()
    const [apiKeyId] = await store.hkeys(keys.accountKeys(b.accountId))
    const steps = marketSteps(store, keys)
    const admitted: Admission[] = []
    for (let i = 0; i < 2; i++) {
      const admission = await steps.admit(
        admitRequest(b.accountId, { apiKeyId: apiKeyId!, holdDiem: 50_000 as never, leaseMs: 60_000 }),
      )
      expect(admission.code).toBe(AdmitCode.Admitted)
      admitted.push(admission as Admission)
    }
    expect(await scrape()).toBe(2)
    for (const a of admitted) {
      const attempt = { attemptId: a.attemptId, accountId: b.accountId, offerId, model: a.model }
      await steps.release(attempt, { errorCode: 'upstream_5xx', cooldownMs: 0, upstreamBalance: null })
    }
    expect(await scrape()).toBe(0)
    await removeOffer(offerId)
  })

  test("/metrics counts the reservations asked of offers by outcome: taken, or the offer's refusal", async () => {
    const count = async (outcome: string) => {
      const response = await fetch(`${stack.url}/metrics`, {
        headers: { authorization: `Bearer ${stack.config.adminToken}` },
      })
      const prefix = `svc_reservations_total{outcome="${outcome}"} `
      const line = (await response.text()).split('\n').find((l) => l.startsWith(prefix))
      return Number(line?.slice(prefix.length) ?? 0)
    }
    const offerId = await postOffer(40)
    const b = await buyer()
    const [apiKeyId] = await store.hkeys(keys.accountKeys(b.accountId))
    const steps = marketSteps(store, keys)
    const request = () =>
      admitRequest(b.accountId, { apiKeyId: apiKeyId!, holdDiem: 50_000 as never, leaseMs: 60_000 })
    const [taken, full] = [await count('taken'), await count('full')]
    const first = (await steps.admit(request())) as Admission
    expect(first.code).toBe(AdmitCode.Admitted)
    expect(await count('taken')).toBe(taken + 1)
    // Other replicas fill the offer behind this one's view: the offer refuses and says it is full.
    const row = owners.offer(offerId).offer(offerId)
    const cap = Number(await store.hget(row, 'maxInFlight'))
    await store.hset(row, 'inflight', cap)
    expect((await steps.admit(request())).code).toBe(AdmitCode.KeysBusy)
    expect(await count('full')).toBe(full + 1)
    expect(await count('taken')).toBe(taken + 1)
    await store.hset(row, 'inflight', 1)
    const attempt = { attemptId: first.attemptId, accountId: b.accountId, offerId, model: first.model }
    await steps.release(attempt, { errorCode: 'upstream_5xx', cooldownMs: 0, upstreamBalance: null })
    await removeOffer(offerId)
  })

  test("an operator's offer held apart lives under its own tag; pausing takes it off the ladder, a new ask places it again", async () => {
    const id = await postOffer(50)
    expect(await slotOf(keys.offer(id))).toBe(await slotOf(owners.offer(id).reservation('x')))
    expect(await slotOf(keys.offer(id))).not.toBe(await slotOf(keys.ladder))
    expect(await store.sismember(keys.offers, id)).toBe(1)
    const seq = Number(await store.hget(keys.offer(id), 'seq'))
    expect(await store.zscore(keys.ladder, id)).toBe(String(50 * 1e9 + seq))
    await offerService.update(id, { status: 'paused' })
    expect(await store.zscore(keys.ladder, id)).toBeNull()
    await offerService.update(id, { status: 'active', askCents: 55 })
    expect(await store.zscore(keys.ladder, id)).toBe(String(55 * 1e9 + seq))
    expect((await offerService.get(id))?.askCents).toBe(55)
    await removeOffer(id)
    expect(await store.zscore(keys.ladder, id)).toBeNull()
    expect(await offerService.get(id)).toBeNull()
  })

  test('new offers spread over the masters evenly, not as random ids would hash', async () => {
    const fresh = keyspace(testPrefix(), 'apart')
    const service = new OfferService(store, fresh, stack.config.masterKey)
    const fresher = ownerKeyspaces(fresh.prefix)
    const perMaster = async () => {
      const counts = new Map<string, number>()
      for (const id of await store.smembers(fresh.offers)) {
        const master = store.masterOf(fresher.offer(id).base)!
        counts.set(master, (counts.get(master) ?? 0) + 1)
      }
      return [...counts.values()].sort()
    }
    const create = () =>
      service.create({
        upstreamBaseUrl: stack.sim.url,
        upstreamApiKey: `sim-key-${randomUUID()}`,
        askCents: 40,
        capacity: 1_000_000 as MicroDiem,
      })
    for (let i = 0; i < 6; i++) await create()
    expect(await perMaster()).toEqual([2, 2, 2])
    for (let i = 0; i < 3; i++) await create()
    expect(await perMaster()).toEqual([3, 3, 3])
  })

  test('the capacity snapshot reads the offers held apart: routable depth by ask, paused ones left out', async () => {
    const cheap = await postOffer(33)
    const paused = await postOffer(34)
    await offerService.update(paused, { status: 'paused' })
    const response = await fetch(`${stack.url}/v1/capacity?maxPriceCents=35`)
    expect(response.status).toBe(200)
    const body = (await response.json()) as { prices: Record<string, unknown>[] }
    expect(body.prices).toEqual([
      { priceCentsPerDollar: 33, routableDiem: '1000.000000', usdcToBuyAll: '330.000000' },
    ])
    await Promise.all([removeOffer(cheap), removeOffer(paused)])
  })

  test('a video job held apart: quoted at the cheapest ask, held while queued, charged once when retrieved', async () => {
    const offerId = await postOffer(40)
    const b = await buyer()
    const send = sender(b.apiKey)
    const job = { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' }
    const quoted = (await (await send('/v1/video/quote', job)).json()) as {
      quoteUsdc: string
      clearingPriceCents: number
    }
    expect(quoted.clearingPriceCents).toBe(40)
    const queued = await send('/v1/video/queue', job)
    expect(queued.status).toBe(200)
    const { id } = (await queued.json()) as { id: string }
    expect(Number((await accountRow(b.accountId)).held)).toBe(Number(quoted.quoteUsdc) * 1e6)
    const media = await retrieveWhenDone(send, id)
    expect(media.headers.get('content-type')).toStartWith('video/')
    await media.arrayBuffer()
    const account = await accountRow(b.accountId)
    expect(Number(account.spent)).toBe(Number(quoted.quoteUsdc) * 1e6)
    expect(Number(account.held)).toBe(0)
    const offer = await offerRow(offerId)
    expect(Number(offer.earned) + Number(offer.fees ?? 0)).toBe(Number(account.spent))
    expect(offer).toMatchObject({ held: '0', inflight: '0' })
    await removeOffer(offerId)
  })

  test("a video job whose account's side a failover lost after it was queued is charged at retrieve, from the admission its job keeps", async () => {
    const offerId = await postOffer(40)
    const b = await buyer()
    const send = sender(b.apiKey)
    // The account's slot as it was before the job: what a replica that never got its admission has.
    // The job's record is on the market's slot, another master's, and survives.
    const before = await saveKeys(store, owners.account(b.accountId).prefix)
    const queued = await send('/v1/video/queue', { model: 'wan-2.1-video', prompt: 'waves', duration: '5s' })
    expect(queued.status).toBe(200)
    const { id } = (await queued.json()) as { id: string }
    const held = Number((await accountRow(b.accountId)).held)
    expect(held).toBeGreaterThan(0)
    await before.restore()
    expect(Number((await accountRow(b.accountId)).held)).toBe(0)
    const media = await retrieveWhenDone(send, id)
    expect(media.status).toBe(200)
    expect(media.headers.get('content-type')).toStartWith('video/')
    await media.arrayBuffer()
    // Charged the job's price (its hold: the job's burn at the ask), late, and the supplier paid it.
    const account = await accountRow(b.accountId)
    expect(Number(account.spent)).toBe(held)
    expect(Number(account.held)).toBe(0)
    const offer = await offerRow(offerId)
    expect(Number(offer.earned) + Number(offer.fees ?? 0)).toBe(held)
    const job = await store.hgetall(keys.videoJob(id))
    const attempt = await attemptRecord(store, owners.account(b.accountId).attempt(job.attemptId!))
    expect(attempt).toMatchObject({ state: 'cleared', costUsdc: String(held), lateClear: 'lost' })
    await removeOffer(offerId)
  })

  test("usage stats held apart: each request served counts once, on its offer's slot, in the day's shares", async () => {
    const offerId = await postOffer(40)
    const b = await buyer()
    // The scripts' day, by Redis's clock.
    const day = new Date(Number((await store.time())[0]) * 1000).toISOString().slice(0, 10)
    const before = Number((await store.hget(keys.offerStatsDay(offerId, day), 'llama-3.3-70b')) ?? 0)
    await b.client.chat.completions.create({ model, messages })
    await b.client.chat.completions.create({ model: 'svc/qwen3-4b', messages })
    await apart.posted()
    expect(await store.hget(keys.offerStatsDay(offerId, day), 'llama-3.3-70b')).toBe(String(before + 1))
    expect(await store.hget(keys.offerStatsDay(offerId, day), 'qwen3-4b')).toBe('1')
    expect(await slotOf(keys.offerStatsDay(offerId, day))).toBe(await slotOf(keys.offer(offerId)))
    const stats = (await (await fetch(`${stack.url}/v1/models/stats?window=24h`)).json()) as {
      hasSufficientVolume: boolean
      models: { id: string }[]
    }
    expect(stats.hasSufficientVolume).toBe(true)
    expect(stats.models.map((m) => m.id)).toContain('qwen3-4b')
    await removeOffer(offerId)
  })

  test('a request admitted again with the same attempt after a refusal that had reserved an offer gets the same refusal', async () => {
    const offerId = await postOffer(60)
    const b = await buyer(40)
    const [apiKeyId] = await store.hkeys(keys.accountKeys(b.accountId))
    const steps = marketSteps(store, keys)
    // Waiting for a busy key asks again under the same attempt id: the offer reserved and voided the
    // first time must not turn the second into a duplicate.
    const request = admitRequest(b.accountId, { apiKeyId: apiKeyId!, holdDiem: 1_000 as never })
    const first = await steps.admit(request)
    const again = await steps.admit(request)
    expect(first.code).toBe(AdmitCode.NoEligibleSupply)
    expect(again.code).toBe(AdmitCode.NoEligibleSupply)
    expect(await offerRow(offerId)).toMatchObject({ held: '0', inflight: '0' })
    await removeOffer(offerId)
  })
})
