// The market over real HTTP: the operator's offer routes and the public capacity snapshot.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { CatalogStore } from '../../src/catalog/store.ts'
import type { Admission } from '../../src/market/admission.ts'
import { capacitySnapshot } from '../../src/market/capacity.ts'
import { release } from '../../src/market/clearing.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { admitFor, type MarketFixture, marketFixture, postOffer, seedAccount } from '../helpers/market.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack()
})
afterAll(() => stack.stop())

function admin(method: string, path: string, body?: unknown, token = stack.config.adminToken) {
  return fetch(`${stack.url}/admin/v1/offers${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
}

const validOffer = {
  upstreamBaseUrl: 'http://127.0.0.1:9/api/v1/',
  upstreamApiKey: 'upstream-secret-0123456789',
  askCents: 42,
  capacityDiem: '12.500000',
}

describe('operator offers', () => {
  test('create answers 201 with the offer and never the upstream key, which is encrypted at rest', async () => {
    const response = await admin('POST', '/', { ...validOffer, maxInFlight: 3, supplier: 'acme' })
    expect(response.status).toBe(201)
    const text = await response.text()
    expect(text).not.toContain(validOffer.upstreamApiKey)
    const offer = JSON.parse(text)
    expect(offer).toMatchObject({
      askCents: 42,
      capacityDiem: '12.500000',
      burnedDiem: '0.000000',
      status: 'active',
      maxInFlight: 3,
      supplier: 'acme',
      upstreamBaseUrl: 'http://127.0.0.1:9/api/v1',
    })
    const stored = await stack.store.hgetall(stack.keys.offer(offer.id))
    expect(JSON.stringify(stored)).not.toContain(validOffer.upstreamApiKey)
    expect(stored.upstreamKeyEnc).toStartWith('v1:')
    expect(await stack.store.zscore(stack.keys.ladder, offer.id)).not.toBeNull()

    const list = await (await admin('GET', '/')).text()
    expect(list).not.toContain(validOffer.upstreamApiKey)
    expect(JSON.parse(list).data.map((o: { id: string }) => o.id)).toContain(offer.id)
  })

  test('pause leaves the ladder, resume returns to it, delete removes the offer', async () => {
    const { id } = (await (await admin('POST', '/', validOffer)).json()) as { id: string }
    const paused = await admin('PATCH', `/${id}`, { status: 'paused', askCents: 55 })
    expect(paused.status).toBe(200)
    expect(await paused.json()).toMatchObject({ status: 'paused', askCents: 55 })
    expect(await stack.store.zscore(stack.keys.ladder, id)).toBeNull()
    await admin('PATCH', `/${id}`, { status: 'active' })
    expect(Number(await stack.store.zscore(stack.keys.ladder, id))).toBeGreaterThanOrEqual(55e9)
    expect((await admin('DELETE', `/${id}`)).status).toBe(200)
    expect((await admin('GET', `/${id}`)).status).toBe(404)
    expect((await admin('PATCH', `/${id}`, { askCents: 40 })).status).toBe(404)
    expect((await admin('DELETE', `/${id}`)).status).toBe(404)
    expect(await stack.store.zscore(stack.keys.ladder, id)).toBeNull()
  })

  // A label shows in pages, logs and terminals: no controls, line separators, bidi overrides, lone surrogates.
  const badLabels: [string, string][] = [
    ['a NUL', 'acme\u0000'],
    ['a line break', 'two\nlines'],
    ['an escape sequence', 'esc\u001b[31m'],
    ['a DEL', 'del\u007f'],
    ['a C1 control', 'c1\u0085'],
    ['a line separator', 'line\u2028'],
    ['a bidi override', 'gpj\u202eexe'],
    ['a lone surrogate', 'lone \ud800'],
  ]

  const bad: [string, unknown][] = [
    ...badLabels.map(([why, supplier]): [string, unknown] => [
      `a supplier label with ${why}`,
      { ...validOffer, supplier },
    ]),
    ['ask below the corridor', { ...validOffer, askCents: 29 }],
    ['ask above the corridor', { ...validOffer, askCents: 81 }],
    ['fractional ask', { ...validOffer, askCents: 50.5 }],
    ['ask as a string', { ...validOffer, askCents: '40' }],
    ['capacity not a number', { ...validOffer, capacityDiem: 'lots' }],
    ['capacity zero', { ...validOffer, capacityDiem: '0' }],
    ['capacity negative', { ...validOffer, capacityDiem: -5 }],
    ['capacity with 7 decimals', { ...validOffer, capacityDiem: '1.0000001' }],
    ['not an http URL', { ...validOffer, upstreamBaseUrl: 'ftp://x' }],
    ['missing key', { ...validOffer, upstreamApiKey: undefined }],
    // A key rides as a Bearer token: one no header can carry would fail every request routed to it.
    ['a key with a space', { ...validOffer, upstreamApiKey: 'sk live' }],
    ['a key with a NUL', { ...validOffer, upstreamApiKey: 'sk\u0000live' }],
    ['a key with a line break', { ...validOffer, upstreamApiKey: 'sk\r\nX-Other: 1' }],
    ['a key past ASCII', { ...validOffer, upstreamApiKey: 'ключ' }],
    ['unknown field', { ...validOffer, color: 'blue' }],
    ['maxInFlight zero', { ...validOffer, maxInFlight: 0 }],
    ['an array', [validOffer]],
    ['not JSON', '{"askCents": 40,'],
  ]
  for (const [why, body] of bad) {
    test(`create with ${why}: 400 and nothing changes in Redis`, async () => {
      const before = await snapshotKeys(stack.store, stack.keys.prefix)
      const response = await admin('POST', '/', body)
      expect(response.status).toBe(400)
      const error = (await response.json()) as { error: { code: string; message: string; type: string } }
      expect(error.error.type).toBe('invalid_request_error')
      expect(error.error.message.length).toBeGreaterThan(5)
      expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    })
  }

  test('a label with a control, bidi or lone surrogate: PATCH 400, nothing changes; a label outside the BMP is taken', async () => {
    const { id } = (await (await admin('POST', '/', { ...validOffer, supplier: 'acme' })).json()) as {
      id: string
    }
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const [why, supplier] of badLabels) {
      const response = await admin('PATCH', `/${id}`, { supplier })
      expect({ why, status: response.status }).toEqual({ why, status: 400 })
      const error = (await response.json()) as { error: { message: string; type: string } }
      expect(error.error).toMatchObject({
        type: 'invalid_request_error',
        message: expect.stringContaining('supplier'),
      })
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    const renamed = await admin('PATCH', `/${id}`, { supplier: 'Acme GPU 🚀 Zürich' })
    expect(renamed.status).toBe(200)
    expect(await renamed.json()).toMatchObject({ supplier: 'Acme GPU 🚀 Zürich' })
  })

  test('an empty PATCH and a capacity below what is used are refused', async () => {
    const { id } = (await (await admin('POST', '/', validOffer)).json()) as { id: string }
    expect((await admin('PATCH', `/${id}`, {})).status).toBe(400)
    expect((await admin('PATCH', `/${id}`, { upstreamApiKey: 'sk live' })).status).toBe(400)
    await stack.store.hset(stack.keys.offer(id), 'burned', 5_000_000)
    const response = await admin('PATCH', `/${id}`, { capacityDiem: '4' })
    expect(response.status).toBe(409)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('capacity_below_used')
  })

  test('an Idempotency-Key: the same create again answers the same offer, other fields under it are a 409', async () => {
    const body = { ...validOffer, upstreamBaseUrl: 'http://127.0.0.1:9/idempotent' }
    const keyed = (b: unknown, key = 'offer-ticket-77') =>
      fetch(`${stack.url}/admin/v1/offers`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${stack.config.adminToken}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify(b),
      })
    const first = await keyed(body)
    expect(first.status).toBe(201)
    expect(first.headers.get('idempotent-replayed')).toBeNull()
    const offer = (await first.json()) as { id: string }
    // Run again after a lost answer: the same offer, nothing created.
    const again = await keyed(body)
    expect(again.status).toBe(201)
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect(((await again.json()) as { id: string }).id).toBe(offer.id)
    const listed = (await (await admin('GET', '/')).json()) as { data: { upstreamBaseUrl: string }[] }
    expect(listed.data.filter((o) => o.upstreamBaseUrl === body.upstreamBaseUrl)).toHaveLength(1)

    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const other = await keyed({ ...body, askCents: 43 })
    expect(other.status).toBe(409)
    expect(await other.json()).toMatchObject({
      error: { code: 'idempotency_key_reused', type: 'invalid_request_error', offerId: offer.id },
    })
    const bad = await keyed(body, 'with space')
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('invalid_idempotency_key')
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })

  test('no token, a wrong token, a buyer-style key: 401', async () => {
    for (const token of ['', 'wrong-token-wrong-token-wrong', 'svc_abc']) {
      const response = await admin('GET', '/', undefined, token)
      expect(response.status).toBe(401)
    }
  })
})

describe('GET /v1/capacity', () => {
  let fx: MarketFixture
  let catalog: CatalogStore
  beforeAll(() => {
    fx = marketFixture()
    catalog = new CatalogStore(stack.store, stack.keys)
  })
  afterAll(() => fx.close())

  test('an empty market: 200 with prices [], zero totals and a null cheapest ask', async () => {
    const { snapshot } = await capacitySnapshot(fx.store, fx.keys, catalog, null)
    expect(snapshot).toMatchObject({
      prices: [],
      routableDiem: '0.000000',
      usdcToBuyAll: '0.000000',
      cheapestPostedCents: null,
    })
  })

  test('over HTTP: the ladder by ask, cheapest first, totals restated for a max price', async () => {
    const offers = (await (await admin('GET', '/')).json()) as { data: { id: string }[] }
    for (const o of offers.data) await admin('DELETE', `/${o.id}`)
    await admin('POST', '/', { ...validOffer, askCents: 60, capacityDiem: '10' })
    await admin('POST', '/', { ...validOffer, askCents: 35, capacityDiem: '2.5' })
    await admin('POST', '/', { ...validOffer, askCents: 35, capacityDiem: '1' })
    await admin('POST', '/', { ...validOffer, askCents: 48, capacityDiem: '0.333333' })
    await admin('POST', '/', { ...validOffer, askCents: 70, capacityDiem: '4', status: 'paused' })

    const full = await fetch(`${stack.url}/v1/capacity`)
    expect(full.status).toBe(200)
    expect(full.headers.get('cache-control')).toMatch(/max-age=\d+/)
    const body = (await full.json()) as Record<string, unknown>
    expect(body.prices).toEqual([
      { priceCentsPerDollar: 35, routableDiem: '3.500000', usdcToBuyAll: '1.225000' },
      { priceCentsPerDollar: 48, routableDiem: '0.333333', usdcToBuyAll: '0.160000' },
      { priceCentsPerDollar: 60, routableDiem: '10.000000', usdcToBuyAll: '6.000000' },
    ])
    expect(body.routableDiem).toBe('13.833333')
    expect(body.usdcToBuyAll).toBe('7.385000')
    expect(body.cheapestPostedCents).toBe(35)
    // The simulated supplier lists three live text models: llama-3.3-70b, qwen3-4b and glm-4.6;
    // three live image models: flux-dev, and nano-banana-pro and gpt-image-2 priced by tier.
    expect(body.modalities).toEqual({
      text: { available: true, liveModels: 3 },
      image: { available: true, liveModels: 3 },
      video: { available: true, liveModels: 1 },
    })
    expect(Date.parse(body.generatedAt as string)).toBeGreaterThan(0)
    expect(JSON.stringify(body)).not.toContain('upstream')

    const narrowed = (await (await fetch(`${stack.url}/v1/capacity?maxPriceCents=48`)).json()) as Record<
      string,
      unknown
    >
    expect((narrowed.prices as unknown[]).length).toBe(2)
    expect(narrowed.routableDiem).toBe('3.833333')
    expect(narrowed.usdcToBuyAll).toBe('1.385000')

    const nothing = (await (await fetch(`${stack.url}/v1/capacity?maxPriceCents=30`)).json()) as Record<
      string,
      unknown
    >
    expect(nothing).toMatchObject({
      prices: [],
      routableDiem: '0.000000',
      usdcToBuyAll: '0.000000',
      cheapestPostedCents: null,
    })
  })

  test('the snapshot is cached for every replica: a change within 30 s is not seen', async () => {
    const first = (await (await fetch(`${stack.url}/v1/capacity?maxPriceCents=79`)).json()) as {
      generatedAt: string
    }
    await admin('POST', '/', { ...validOffer, askCents: 31, capacityDiem: '99' })
    const second = (await (await fetch(`${stack.url}/v1/capacity?maxPriceCents=79`)).json()) as {
      generatedAt: string
    }
    expect(second).toEqual(first)
    expect(await stack.store.ttl(stack.keys.capacitySnapshot(79))).toBeGreaterThan(0)
  })

  for (const raw of ['29', '81', '0', '50.5', 'abc', '', '-40', '1e2', '040000']) {
    test(`maxPriceCents=${raw} is a 400, never clamped`, async () => {
      const response = await fetch(`${stack.url}/v1/capacity?maxPriceCents=${raw}`)
      expect(response.status).toBe(400)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_max_price')
    })
  }

  test('the snapshot agrees with the router for every max price', async () => {
    const router = marketFixture()
    try {
      await postOffer(router, 33, 2_000)
      await postOffer(router, 45, 500_000)
      await postOffer(router, 45, 300_000, { status: 'paused' })
      await postOffer(router, 61, 900_000)
      await postOffer(router, 80, 1)
      for (let max = 30; max <= 80; max++) {
        const { snapshot } = await capacitySnapshot(router.store, router.keys, catalog, max)
        const acct = await seedAccount(router, 10_000_000, max)
        for (const estimate of [1, 2_000, 2_001, 500_000, 900_001]) {
          const result = await admitFor(router, acct, { holdDiem: estimate as never })
          const depth = snapshot.prices.map((p) => Number(p.routableDiem.replace('.', '')))
          if (result.code === AdmitCode.Admitted) {
            const adm = result as Admission
            // the router picked the cheapest ask whose depth could carry it
            const first = snapshot.prices.find((_, i) => depth[i]! >= estimate)!
            expect(adm.askCents).toBe(first.priceCentsPerDollar)
            await release(router.store, router.keys, {
              attemptId: adm.attemptId,
              errorCode: 't',
              cooldownMs: 0,
              upstreamBalance: null,
            })
          } else if (snapshot.prices.length === 0) {
            expect([AdmitCode.NoEligibleSupply, AdmitCode.PoolEmpty]).toContain(result.code)
          } else {
            expect(result.code).toBe(AdmitCode.InsufficientRoutable)
            expect(Math.max(...depth)).toBeLessThan(estimate)
          }
        }
      }
    } finally {
      router.close()
    }
  })
})
