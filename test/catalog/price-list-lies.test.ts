// An upstream price list that lies or changes moves no money wrongly: a slower, older sync never
// overwrites a newer list; an id listed twice with different rows is coming_soon, never billed at
// whichever copy came last; an empty or enormous list, or one with no readable model, keeps the
// catalog there; a video model whose constraints lie is not live, and its job a 400; so is an image
// model whose tier prices lie.
import { afterAll, expect, test } from 'bun:test'
import { CatalogStore } from '../../src/catalog/store.ts'
import { syncCatalog } from '../../src/catalog/sync.ts'
import { mapUpstreamModel, mapUpstreamModels } from '../../src/catalog/venice-mapping.ts'
import { priceVideoModels } from '../../src/catalog/video-prices.ts'
import { ApiError } from '../../src/errors.ts'
import { validateImages } from '../../src/inference/image-request.ts'
import { validateVideo } from '../../src/inference/video-request.ts'
import { marketFixture } from '../helpers/market.ts'
import { until } from '../helpers/wait.ts'

const fx = marketFixture()
afterAll(() => fx.close())

const textModel = (id: string, input: number, output: number) => ({
  id,
  type: 'text',
  model_spec: {
    name: id,
    availableContextTokens: 1000,
    maxCompletionTokens: 100,
    pricing: { input: { diem: input }, output: { diem: output } },
  },
})

/** An upstream whose /models answers are queued by the test; one answer can wait on a gate. */
function upstream() {
  const answers: { body: unknown; gate?: Promise<void> }[] = []
  let asked = 0
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: async () => {
      const answer = answers.shift()!
      asked++
      if (answer.gate) await answer.gate
      return Response.json(answer.body)
    },
  })
  return {
    answers,
    asked: () => asked,
    source: { upstreamUrl: `http://127.0.0.1:${server.port}`, disabledModels: [] as string[] },
    stop: () => server.stop(true),
  }
}

test('a duplicated id with conflicting prices is not billed at whichever copy came last', () => {
  // The upstream lists 'm' twice: which price it bills is unknown, so neither may be trusted.
  const entries = mapUpstreamModels({ data: [textModel('m', 3, 12), textModel('m', 0.1, 0.1)] })
  const ids = entries.map((e) => e.row.id)
  expect(new Set(ids).size).toBe(ids.length) // one row per id
  const m = entries.find((e) => e.row.id === 'm')!
  expect(m.row.status).toBe('coming_soon')
  expect(m.prices).toBeNull()
})

test("an upstream id that is another's `svc/` name is not listed at a price the id does not bill", async () => {
  // Buyers name 'm' as 'svc/m' too: a row listed as 'svc/m' would show its own price and bill m's.
  const keys = { ...fx.keys, catalog: `${fx.keys.prefix}:cat5`, catalogMeta: `${fx.keys.prefix}:cat5m` }
  const catalog = new CatalogStore(fx.store, keys)
  await catalog.replace(
    mapUpstreamModels({ data: [textModel('m', 3, 12), textModel('svc/m', 0.1, 0.1)] }),
    'u',
  )
  const listed = [...(await catalog.all()).values()]
  expect(listed.length).toBeGreaterThan(0)
  for (const row of listed) expect(await catalog.get(row.row.id)).toEqual(row)
  expect((await catalog.get('svc/m'))!.prices!.inputPerMillion).toBe(3_000_000)
})

test('a model the list prices at nothing is not live: it would bill buyers nothing while the upstream may bill the key', () => {
  const free = textModel('free', 0, 0)
  const [entry] = mapUpstreamModels({ data: [free, textModel('paid', 0, 1)] })
  expect(entry!.row.status).toBe('coming_soon')
  expect(mapUpstreamModels({ data: [free, textModel('paid', 0, 1)] })[1]!.row.status).toBe('live')
  const image = {
    id: 'img',
    type: 'image',
    model_spec: { name: 'img', pricing: { generation: { diem: 0 } } },
  }
  expect(mapUpstreamModels({ data: [image] })[0]!.row.status).toBe('coming_soon')
})

test('ids apart only in case or space stay live when they bill alike, and not when they do not', () => {
  const alike = mapUpstreamModels({ data: [textModel('m', 3, 12), textModel('M', 3, 12)] })
  expect(alike.map((e) => [e.row.id, e.row.status])).toEqual([
    ['m', 'live'],
    ['M', 'live'],
  ])
  const apart = mapUpstreamModels({
    data: [textModel('m', 3, 12), textModel('m ', 3, 11), textModel('n', 1, 1)],
  })
  expect(apart.map((e) => [e.row.id, e.row.status, e.prices])).toEqual([
    ['m', 'coming_soon', null],
    ['m ', 'coming_soon', null],
    ['n', 'live', { inputPerMillion: 1_000_000, outputPerMillion: 1_000_000 }],
  ])
})

test('an identical duplicate stays live', () => {
  const entries = mapUpstreamModels({ data: [textModel('m', 3, 12), textModel('m', 3, 12)] })
  expect(entries.length).toBe(1)
  expect(entries[0]!.row.status).toBe('live')
})

test('a sync that fetched an older list never overwrites a newer one written meanwhile', async () => {
  const up = upstream()
  let open!: () => void
  // Replica A asks first and its answer (the old price) is slow; replica B asks later and gets the
  // new price at once.
  up.answers.push({ body: { data: [textModel('m', 1, 1)] }, gate: new Promise((r) => (open = r)) })
  up.answers.push({ body: { data: [textModel('m', 5, 5)] } })
  const a = new CatalogStore(fx.store, fx.keys)
  const b = new CatalogStore(fx.store, fx.keys)
  const slow = syncCatalog(a, up.source)
  await until(() => up.asked() === 1)
  await syncCatalog(b, up.source)
  expect((await b.get('m'))!.prices!.inputPerMillion).toBe(5_000_000)
  open()
  await slow
  const reader = new CatalogStore(fx.store, fx.keys)
  // The upstream's newest answer stands: 5 DIEM per million, not the 1 that A fetched before it.
  expect((await reader.get('m'))!.prices!.inputPerMillion).toBe(5_000_000)
  up.stop()
})

test('an upstream answering an empty list does not empty the catalog', async () => {
  const keys = { ...fx.keys, catalog: `${fx.keys.prefix}:cat2`, catalogMeta: `${fx.keys.prefix}:cat2m` }
  const up = upstream()
  up.answers.push({ body: { data: [textModel('m', 1, 1)] } })
  up.answers.push({ body: { data: [] } })
  const catalog = new CatalogStore(fx.store, keys)
  expect(await syncCatalog(catalog, up.source)).toBe(1)
  await expect(syncCatalog(catalog, up.source)).rejects.toThrow()
  expect(await fx.store.hkeys(keys.catalog)).toEqual(['m'])
  up.stop()
})

test('an upstream list of which no model can be read does not empty the catalog', async () => {
  // A changed schema (a type renamed, model_spec moved) lists hundreds of models and maps none:
  // that upstream is failing as surely as one that lists nothing, and every buyer would get a 404.
  const keys = { ...fx.keys, catalog: `${fx.keys.prefix}:cat4`, catalogMeta: `${fx.keys.prefix}:cat4m` }
  const up = upstream()
  up.answers.push({ body: { data: [textModel('m', 1, 1)] } })
  up.answers.push({
    body: {
      data: [
        { ...textModel('m', 1, 1), type: 'LLM' },
        { id: 'n', spec: {} },
      ],
    },
  })
  const catalog = new CatalogStore(fx.store, keys)
  expect(await syncCatalog(catalog, up.source)).toBe(1)
  await expect(syncCatalog(catalog, up.source)).rejects.toThrow()
  expect(await fx.store.hkeys(keys.catalog)).toEqual(['m'])
  expect((await new CatalogStore(fx.store, keys).get('m'))!.row.status).toBe('live')
  up.stop()
})

test('a list whose every model the operator disabled is written: an empty catalog is the choice', () => {
  expect(mapUpstreamModels({ data: [textModel('m', 1, 1)] }, ['svc/m'])).toEqual([])
})

test('a list whose every model the upstream says is offline is written: no model is served', () => {
  const model = textModel('m', 1, 1)
  expect(
    mapUpstreamModels({ data: [{ ...model, model_spec: { ...model.model_spec, offline: true } }] }),
  ).toEqual([])
})

test("a video model whose constraints lie is not live; its job is a 400, not the gateway's 500", async () => {
  const entry = mapUpstreamModel({
    id: 'v',
    type: 'video',
    model_spec: { constraints: { durations: '5s' } },
  })!
  expect(entry.row.status).toBe('coming_soon')
  // Its quotes cannot even be asked for: it stays off live whatever the upstream would quote.
  const [priced] = await priceVideoModels([entry], { upstreamUrl: 'http://127.0.0.1:9', upstreamApiKey: 'k' })
  expect(priced!.row.status).toBe('coming_soon')
  expect(() => validateVideo({ model: 'v', prompt: 'p', duration: '5s' }, priced)).toThrow(ApiError)
  // A live table asked for a resolution named as an object's own field: a 400, never a prototype's price.
  const live = {
    row: { ...entry.row, status: 'live' as const },
    prices: { perVideo: { '5s': { '720p': 5, '*': 6 } } },
  }
  const unnamed = { model: 'v', prompt: 'p', duration: '5s' }
  const body = { ...unnamed, resolution: 'constructor' } as typeof unnamed
  expect(() => validateVideo(body, live)).toThrow(ApiError)
  expect(validateVideo({ ...unnamed, resolution: '720p' } as typeof unnamed, live).holdDiem).toBe(5 as never)
  expect(validateVideo(unnamed, live).holdDiem).toBe(6 as never)
  expect(() => validateVideo({ ...body, duration: '7s' }, live)).toThrow(ApiError)
})

test('a list too large to hold is refused and the catalog there kept', async () => {
  // 200,000 models: the replace script blocks Redis (every money script) for seconds, and every
  // replica re-parses the whole hash on its main thread each time its 1 s cache expires.
  const keys = { ...fx.keys, catalog: `${fx.keys.prefix}:cat3`, catalogMeta: `${fx.keys.prefix}:cat3m` }
  const up = upstream()
  up.answers.push({ body: { data: [textModel('m', 1, 1)] } })
  up.answers.push({ body: { data: Array.from({ length: 200_000 }, (_, i) => textModel(`m${i}`, 1, 1)) } })
  const catalog = new CatalogStore(fx.store, keys)
  await syncCatalog(catalog, up.source)
  // Refused by its bytes, while they stream in: past 16 MiB nothing more is read.
  await expect(syncCatalog(catalog, up.source)).rejects.toThrow(
    `upstream /models is larger than ${16 * 1024 * 1024} bytes`,
  )
  expect(await fx.store.hlen(keys.catalog)).toBe(1)
  up.stop()
})

test('an image tier the list cannot price exactly leaves the model not live; a request to it is a 400', () => {
  const good = { usd: 0.27, diem: 0.27 }
  const image = (pricing: Record<string, unknown>) => ({
    id: 'img',
    type: 'image',
    model_spec: { name: 'img', constraints: { quality: { default: 'high' } }, pricing },
  })
  const lies: [string, unknown][] = [
    ['a tier of "abc"', { '1K': good, '2K': { usd: 'abc', diem: 'abc' } }],
    ['a negative tier', { '1K': good, '2K': { usd: -0.5, diem: -0.5 } }],
    ['a tier with no amount', { '1K': good, '2K': {} }],
    [
      'a tier whose diem is not a number',
      { '1K': good, '2K': { usd: 0.5, diem: null, x: 1 }, '4K': { diem: true } },
    ],
    ['a tier with more than 6 decimals', { '1K': { diem: 0.0000001 } }],
    ['a tier of nothing', { '1K': good, '2K': { usd: 0, diem: 0 } }],
    ['a tier whose usd and diem disagree', { '1K': { usd: 0.27, diem: 0.2 } }],
    ['an empty table', {}],
    ['a table that is a list', [good]],
    ['a tier named as no request can', { '1K': good, '': good }],
  ]
  for (const [why, table] of lies) {
    for (const pricing of [
      { resolutions: table },
      { resolutions: { '1K': good }, quality: { '1K': table } },
      { resolutions: { '1K': good }, quality: table },
    ]) {
      const entry = mapUpstreamModels({ data: [image(pricing)] })[0]!
      expect([why, entry.row.status, entry.prices]).toEqual([why, 'coming_soon', null])
      expect(() => validateImages({ model: 'img', prompt: 'p', resolution: '1K' } as never, entry)).toThrow(
        ApiError,
      )
    }
  }
  // A tier listed in usd alone is billed at it, as every price of the list is (1 DIEM = $1).
  const usdOnly = mapUpstreamModels({ data: [image({ resolutions: { '1K': { usd: 0.5 } } })] })[0]!
  expect(usdOnly.prices).toEqual({ imageTiers: { resolutions: { '1K': 500_000 } } })
  // A tier named as an object's own field is a tier, never a prototype's.
  const own = mapUpstreamModels({ data: [image({ resolutions: { constructor: good } })] })[0]!
  expect(own.row.status).toBe('live')
  expect(
    validateImages({ model: 'img', prompt: 'p', resolution: 'constructor' } as never, own).perImage,
  ).toBe(270_000 as never)
  expect(() => validateImages({ model: 'img', prompt: 'p', resolution: 'toString' } as never, own)).toThrow(
    ApiError,
  )
})
