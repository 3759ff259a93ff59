// Video priced as the upstream prices it: no price in its `/models`, a quote endpoint that answers a
// job's price in USD, a queue that debits exactly that. The catalog holds each video model at its
// quoted prices; a job is burned at its own key's quote, asked right before its queue. A quote that
// lies (no price, past the hold, a supplier that debits other than it quotes) moves no money wrongly.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { CatalogStore } from '../../src/catalog/store.ts'
import { syncCatalog } from '../../src/catalog/sync.ts'
import { auditAll } from '../../src/cli/audit.ts'
import { costAtAsk, formatMicros, parseMicros } from '../../src/money/units.ts'
import { SIM_MODELS } from '../../src/sim/models.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer, type SimOffer, simKeyState, simOffer } from '../helpers/buyers.ts'
import { moneyAndMarketKeys, snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { retrieveWhenDone, videoMp4 } from '../helpers/video.ts'

const MODEL = 'wan-2.1-video'
const ASK = 40
const stacks: TestStack[] = []
let stack: TestStack
let buyer: TestAccount
let offer: SimOffer

/** A supplier of the test's own: its quote is the test's; its queue counts, its jobs are MP4s. */
let liarQuote: () => Response = () => Response.json({ quote: 0.25 })
let liarQueued = 0
const liar = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  fetch: (request) => {
    const path = new URL(request.url).pathname
    if (path === '/video/quote') return liarQuote()
    if (path === '/video/queue') {
      liarQueued += 1
      return Response.json({ model: MODEL, queue_id: crypto.randomUUID() })
    }
    return videoMp4()
  },
})
const liarUrl = `http://127.0.0.1:${liar.port}`

beforeAll(async () => {
  stack = await startStack({ sim: { videoJobMs: 50 } })
  stacks.push(stack)
  offer = await simOffer(stack, ASK)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  for (const s of stacks) await s.stop()
  liar.stop(true)
})

const post = (s: TestStack, key: string, path: string, json: Record<string, unknown>) =>
  keyFetch(s, key, path, { method: 'POST', json })
const simMicros = async (s: TestStack, key: string) => parseMicros((await simKeyState(s, key)).balanceDiem)!

describe('the simulated supplier', () => {
  const quote = (body: Record<string, unknown>, key = 'any-key') =>
    fetch(`${stack.sim.url}/api/v1/video/quote`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })

  test('lists no video price; quotes by duration and resolution at no charge; its queue debits the quote', async () => {
    const list = (await (await fetch(`${stack.sim.url}/models?type=all`)).json()) as {
      data: { id: string; model_spec: { pricing?: unknown } }[]
    }
    expect(list.data.find((m) => m.id === MODEL)!.model_spec.pricing).toBeUndefined()
    const key = 'quote-key'
    const before = await simMicros(stack, key)
    expect(await (await quote({ model: MODEL, duration: '5s' }, key)).json()).toEqual({ quote: 0.25 })
    expect(await (await quote({ model: MODEL, duration: '5s', resolution: '480p' }, key)).json()).toEqual({
      quote: 0.15,
    })
    expect(await (await quote({ model: MODEL, duration: '10s', resolution: '480p' }, key)).json()).toEqual({
      quote: 0.3,
    })
    expect((await quote({ model: MODEL, duration: '5s', resolution: '8k' }, key)).status).toBe(400)
    expect((await quote({ model: MODEL, duration: '5s', audio: true }, key)).status).toBe(400)
    for (const resolution of ['__proto__', 'constructor', 'toString'])
      expect((await quote({ model: MODEL, duration: '5s', resolution }, key)).status).toBe(400)
    expect((await quote({ model: 'flux-dev', duration: '5s' }, key)).status).toBe(404)
    const anonymous = await fetch(`${stack.sim.url}/video/quote`, { method: 'POST', body: '{}' })
    expect(anonymous.status).toBe(401)
    expect(await simMicros(stack, key)).toBe(before)

    const queued = await fetch(`${stack.sim.url}/video/queue`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: 'p', duration: '10s', resolution: '480p' }),
    })
    expect(queued.status).toBe(200)
    expect(before - (await simMicros(stack, key))).toBe(300_000)
  })
})

describe('the gateway', () => {
  test('the catalog lists the video model live at the prices its quotes gave', async () => {
    const row = (await (await keyFetch(stack, buyer.apiKey, `/v1/models/${MODEL}`)).json()) as {
      status: string
      pricing: unknown
    }
    expect(row.status).toBe('live')
    expect(row.pricing).toEqual({
      currency: 'USD',
      unit: 'video',
      '5s': { '480p': '0.150000', '720p': '0.250000' },
      '10s': { '480p': '0.300000', '720p': '0.500000' },
    })
  })

  test("a 480p job is quoted, held and burned at its own price: the key's debit, to the micro", async () => {
    const job = { model: MODEL, prompt: 'harbour', duration: '5s', resolution: '480p' }
    const cost = costAtAsk(150_000 as never, ASK)
    const quoted = (await (await post(stack, buyer.apiKey, '/v1/video/quote', job)).json()) as {
      quoteUsdc: string
    }
    expect(quoted.quoteUsdc).toBe(formatMicros(cost))
    const keyBefore = await simMicros(stack, offer.upstreamKey)
    const before = await balances(stack, buyer.accountId)
    const queued = await post(stack, buyer.apiKey, '/v1/video/queue', job)
    expect(queued.status).toBe(200)
    const { id, heldUsdc } = (await queued.json()) as { id: string; heldUsdc: string }
    expect(heldUsdc).toBe(formatMicros(cost))
    expect(keyBefore - (await simMicros(stack, offer.upstreamKey))).toBe(150_000)
    const media = await retrieveWhenDone((path, json) => post(stack, buyer.apiKey, path, json as never), id)
    expect(media.headers.get('content-type')).toBe('video/mp4')
    expect(media.headers.get('x-svc-cost-usdc')).toBe(formatMicros(cost))
    const after = await balances(stack, buyer.accountId)
    expect(before.confirmed - after.confirmed).toBe(cost)
    expect(after.held).toBe(0)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })

  test('a resolution the catalog has no quote for is a 400 naming it, before any hold: Redis and the key unchanged', async () => {
    const keyBefore = await simMicros(stack, offer.upstreamKey)
    const before = moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))
    for (const resolution of ['8k', '720P', 720, '*', '__proto__']) {
      const job = { model: MODEL, prompt: 'harbour', duration: '5s', resolution }
      for (const path of ['/v1/video/quote', '/v1/video/queue']) {
        const refused = await post(stack, buyer.apiKey, path, job)
        expect(refused.status).toBe(400)
        const { error } = (await refused.json()) as {
          error: { code: string; param?: string; message: string }
        }
        expect(error.code).toBe('invalid_resolution')
        expect(error.param).toBe('resolution')
        expect(error.message).toContain('480p')
      }
    }
    expect(moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))).toEqual(before)
    expect(await simMicros(stack, offer.upstreamKey)).toBe(keyBefore)
  })
})

describe('a supplier whose quote lies', () => {
  let liarStack: TestStack
  let who: TestAccount
  beforeAll(async () => {
    liarStack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0' } })
    stacks.push(liarStack)
    await postOffer(liarStack, liarUrl, ASK)
    who = await fundedBuyer(liarStack, '5.000000')
  })
  const job = { model: MODEL, prompt: 'harbour', duration: '5s' }
  const answer =
    (body: string, status = 200) =>
    () =>
      new Response(body, { status, headers: { 'content-type': 'application/json' } })

  for (const [why, quote] of [
    ['no quote', answer('{}')],
    ['a quote that is a string', answer('{"quote":"0.25"}')],
    ['a negative quote', answer('{"quote":-0.25}')],
    ['an infinite quote', answer('{"quote":1e400}')],
    ['a quote past any price', answer('{"quote":5000}')],
    ['a quote above the hold', answer('{"quote":0.250001}')],
    ['a quote of nothing', answer('{"quote":0}')],
    ['a quote below one micro-DIEM', answer('{"quote":0.0000001}')],
    ['a body that is not JSON', answer('quote: 0.25')],
    ['a failing quote endpoint', answer('{"error":"down"}', 503)],
  ] as [string, () => Response][]) {
    test(`${why}: 502, nothing queued, no money moved`, async () => {
      liarQuote = quote
      const queuedBefore = liarQueued
      const before = await balances(liarStack, who.accountId)
      const response = await post(liarStack, who.apiKey, '/v1/video/queue', job)
      expect(response.status).toBe(502)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('provider_error')
      expect(liarQueued).toBe(queuedBefore)
      expect(await balances(liarStack, who.accountId)).toEqual(before)
      expect(await auditAll(liarStack.store, liarStack.keys)).toEqual([])
    })
  }

  test('three jobs racing a wallet that holds one: one is queued and burned at its quote, the rest are 402', async () => {
    liarQuote = answer('{"quote":0.2}')
    const one = await fundedBuyer(liarStack, formatMicros(costAtAsk(250_000 as never, ASK)))
    const racing = await Promise.all([0, 1, 2].map(() => post(liarStack, one.apiKey, '/v1/video/queue', job)))
    const answers = await Promise.all(racing.map(async (r) => ({ status: r.status, json: await r.json() })))
    expect(answers.map((a) => a.status).sort()).toEqual([200, 402, 402])
    const { id } = answers.find((a) => a.status === 200)!.json as { id: string }
    const media = await retrieveWhenDone((path, json) => post(liarStack, one.apiKey, path, json as never), id)
    expect(media.headers.get('x-svc-cost-usdc')).toBe(formatMicros(costAtAsk(200_000 as never, ASK)))
    expect(await balances(liarStack, one.accountId)).toEqual({
      confirmed: costAtAsk(250_000 as never, ASK) - costAtAsk(200_000 as never, ASK),
      held: 0,
      spent: costAtAsk(200_000 as never, ASK),
    })
    expect(await auditAll(liarStack.store, liarStack.keys)).toEqual([])
  })

  test('a quote finer than the micro-DIEM, below the hold, is burned rounded down: never above the bill', async () => {
    // It says 0.1234567 and may debit its key anything: the buyer pays the quote, at most the hold.
    liarQuote = answer('{"quote":0.1234567}')
    const before = await balances(liarStack, who.accountId)
    const queued = await post(liarStack, who.apiKey, '/v1/video/queue', job)
    expect(queued.status).toBe(200)
    const { id, heldUsdc } = (await queued.json()) as { id: string; heldUsdc: string }
    // Held at the catalog's price of the job; burned at its key's quote.
    expect(heldUsdc).toBe(formatMicros(costAtAsk(250_000 as never, ASK)))
    const media = await retrieveWhenDone((path, json) => post(liarStack, who.apiKey, path, json as never), id)
    expect(media.headers.get('x-svc-cost-usdc')).toBe(formatMicros(costAtAsk(123_456 as never, ASK)))
    const after = await balances(liarStack, who.accountId)
    expect(before.confirmed - after.confirmed).toBe(costAtAsk(123_456 as never, ASK))
    expect(after.held).toBe(0)
    expect(await auditAll(liarStack.store, liarStack.keys)).toEqual([])
  })
})

test('a sync without the upstream key (a replica started without one) keeps the video prices the catalog holds', async () => {
  const row = async () =>
    (await (await fetch(`${stack.url}/v1/models/${MODEL}`)).json()) as Record<string, unknown>
  const before = await row()
  expect(before.status).toBe('live')
  const catalog = new CatalogStore(stack.store, stack.keys)
  expect(await syncCatalog(catalog, { upstreamUrl: stack.sim.url, disabledModels: [] })).toBeGreaterThan(0)
  const stored = (await new CatalogStore(stack.store, stack.keys).get(MODEL))!
  expect(stored.row.status).toBe('live')
  expect(stored.row.pricing).toEqual(before.pricing as NonNullable<typeof stored.row.pricing>)
  expect(Object.keys(stored.prices?.perVideo ?? {}).length).toBeGreaterThan(0)
})

test('an upstream whose quotes are no price: its video model is not live, and a job changes nothing in Redis', async () => {
  const upstream = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: (request) =>
      new URL(request.url).pathname === '/video/quote'
        ? Response.json({ quote: -1 })
        : Response.json({ object: 'list', data: SIM_MODELS }),
  })
  try {
    const lying = await startStack({ env: { SVC_UPSTREAM_URL: `http://127.0.0.1:${upstream.port}` } })
    stacks.push(lying)
    const who = await fundedBuyer(lying)
    const row = (await (await keyFetch(lying, who.apiKey, `/v1/models/${MODEL}`)).json()) as {
      status: string
      pricing?: unknown
    }
    expect(row.status).toBe('coming_soon')
    expect(row.pricing).toBeUndefined()
    const before = moneyAndMarketKeys(await snapshotKeys(lying.store, lying.keys.prefix))
    for (const path of ['/v1/video/quote', '/v1/video/queue']) {
      const response = await post(lying, who.apiKey, path, { model: MODEL, prompt: 'p', duration: '5s' })
      expect(response.status).toBe(400)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('model_not_live')
    }
    expect(moneyAndMarketKeys(await snapshotKeys(lying.store, lying.keys.prefix))).toEqual(before)
  } finally {
    upstream.stop(true)
  }
})
