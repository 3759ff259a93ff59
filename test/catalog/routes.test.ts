// GET /v1/models and GET /v1/models/{id} over real HTTP, on a catalog synced from the simulated
// supplier into a real Redis.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { CatalogStore } from '../../src/catalog/store.ts'
import { syncCatalog } from '../../src/catalog/sync.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack({ env: { SVC_DISABLED_MODELS: 'qwen3-4b' } })
})
afterAll(() => stack.stop())

const get = (path: string) => fetch(`${stack.url}${path}`)

describe('GET /v1/models', () => {
  test('lists the synced catalog as a list envelope', async () => {
    const response = await get('/v1/models')
    expect(response.status).toBe(200)
    expect(response.headers.get('x-svc-request-id')).toMatch(/^req_[0-9a-f]{24}$/)
    const body = (await response.json()) as { object: string; data: Record<string, unknown>[] }
    expect(body.object).toBe('list')
    const ids = body.data.map((m) => m.id)
    expect(ids).toEqual([
      'deepseek-r2-preview',
      'flux-dev',
      'glm-4.6',
      'gpt-image-2',
      'llama-3.3-70b',
      'nano-banana-pro',
      'wan-2.1-video',
    ])
    for (const row of body.data) {
      expect(row.capabilities).toBeDefined()
      expect(['live', 'coming_soon']).toContain(row.status as string)
      if (row.status === 'live') expect(row.pricing).toBeDefined()
      else expect(row.pricing).toBeUndefined()
    }
  })
})

describe('GET /v1/models/{id}', () => {
  test('bare slug and svc/ prefix give the same row, always with the bare slug', async () => {
    const bare = (await (await get('/v1/models/llama-3.3-70b')).json()) as { id: string }
    const prefixed = await get('/v1/models/svc/llama-3.3-70b')
    expect(prefixed.status).toBe(200)
    const prefixedBody = (await prefixed.json()) as { id: string }
    expect(prefixedBody).toEqual(bare)
    expect(prefixedBody.id).toBe('llama-3.3-70b')
    const encoded = (await (await get('/v1/models/svc%2Fllama-3.3-70b')).json()) as { id: string }
    expect(encoded.id).toBe('llama-3.3-70b')
  })

  test('the single object equals its element of the list', async () => {
    const list = (await (await get('/v1/models')).json()) as { data: { id: string }[] }
    for (const row of list.data) {
      expect(await (await get(`/v1/models/${row.id}`)).json()).toEqual(row)
    }
  })

  test("the upstream's cache prices and long-prompt tier reach the synced row", async () => {
    const row = (await (await get('/v1/models/svc/glm-4.6')).json()) as Record<string, unknown>
    expect(row.status).toBe('live')
    expect(row.pricing).toEqual({
      currency: 'USD',
      unit: 'million_tokens',
      input: '0.850000',
      output: '2.750000',
      cache_input: '0.110000',
      cache_write: '1.050000',
      extended: {
        context_token_threshold: 2_000,
        input: '1.700000',
        output: '4.125000',
        cache_input: '0.220000',
        cache_write: '2.100000',
      },
    })
  })

  test('coming_soon answers 200', async () => {
    const response = await get('/v1/models/svc/deepseek-r2-preview')
    expect(response.status).toBe(200)
    expect(((await response.json()) as { status: string }).status).toBe('coming_soon')
  })

  for (const [why, id] of [
    ['unknown', 'no-such-model'],
    ['offline upstream', 'mistral-retired'],
    ['disabled by the operator', 'qwen3-4b'],
    ['disabled, prefixed', 'svc/qwen3-4b'],
    ['bad escape', '%E0%A4%A'],
  ]) {
    test(`${why} answers 404 in the error shape`, async () => {
      const response = await get(`/v1/models/${id}`)
      expect(response.status).toBe(404)
      const body = (await response.json()) as { error: { code: string; type: string; message: string } }
      expect(body.error.code).toBe('model_not_found')
      expect(body.error.type).toBe('not_found_error')
      expect(typeof body.error.message).toBe('string')
    })
  }
})

describe('catalog sync', () => {
  test('a failed sync keeps the catalog that is there', async () => {
    const store = new CatalogStore(stack.store, stack.keys)
    const before = await stack.store.hgetall(stack.keys.catalog)
    const unreachable = { upstreamUrl: 'http://127.0.0.1:1', disabledModels: [] }
    await expect(syncCatalog(store, unreachable)).rejects.toThrow()
    expect(await stack.store.hgetall(stack.keys.catalog)).toEqual(before)
  })

  test('the replace script swaps the whole catalog at once and records when', async () => {
    const store = new CatalogStore(stack.store, {
      ...stack.keys,
      catalog: `${stack.keys.prefix}:scratch`,
      catalogMeta: `${stack.keys.prefix}:scratch-meta`,
    })
    await stack.store.hset(`${stack.keys.prefix}:scratch`, 'stale-model', '{}')
    const [entry] = [...(await new CatalogStore(stack.store, stack.keys).all()).values()]
    expect(await store.replace([entry!], 'http://upstream')).toBe(1)
    expect(await stack.store.hkeys(`${stack.keys.prefix}:scratch`)).toEqual([entry!.row.id])
    const meta = await stack.store.hgetall(`${stack.keys.prefix}:scratch-meta`)
    expect(meta.count).toBe('1')
    expect(meta.source).toBe('http://upstream')
    expect(Number(meta.syncedAt)).toBeGreaterThan(0)
  })
})
