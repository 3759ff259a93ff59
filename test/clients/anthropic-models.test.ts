// Anthropic's own client (@anthropic-ai/sdk) against GET /v1/models and GET /v1/models/{id}: the
// anthropic-version header it always sends gets Anthropic's Models API (its paging, its items, its
// errors), listing exactly the models /v1/messages takes; a refused query writes nothing.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import type { CatalogRow } from '../../src/catalog/entry.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let client: Anthropic
let rows: CatalogRow[]

// The live text models of the simulated supplier's catalog, all of one date: by id.
const SERVED = ['glm-4.6', 'llama-3.3-70b', 'qwen3-4b']

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 3 } })
  // The models routes are public: whatever key the client holds is not asked for.
  client = new Anthropic({ apiKey: 'sk-ant-not-a-gateway-key', baseURL: stack.url, maxRetries: 0 })
  rows = ((await (await fetch(`${stack.url}/v1/models`)).json()) as { data: CatalogRow[] }).data
})
afterAll(() => stack.stop())

const rowOf = (id: string) => rows.find((row) => row.id === id)!

/** The Anthropic SDK's error body of a refused call. */
async function refusal(call: Promise<unknown>) {
  const error = (await call.then(
    () => expect.unreachable('the call was answered'),
    (e: unknown) => e,
  )) as InstanceType<typeof Anthropic.APIError>
  expect(error).toBeInstanceOf(Anthropic.APIError)
  return { status: error.status, body: error.error as { type: string; error: Record<string, string> } }
}

describe('models.list', () => {
  test('one page of Anthropic model infos: the models /v1/messages serves, named as the catalog names them', async () => {
    const page = await client.models.list()
    expect(page.data.map((m) => m.id)).toEqual(SERVED)
    expect(page.has_more).toBe(false)
    expect(page.first_id).toBe('glm-4.6')
    expect(page.last_id).toBe('qwen3-4b')
    for (const model of page.data) {
      const row = rowOf(model.id)
      expect(model.type).toBe('model')
      expect(model.display_name).toBe(row.name)
      expect(model.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
      expect(Date.parse(model.created_at)).toBe(row.created * 1000)
      expect(model.max_input_tokens).toBe(row.context_length!)
      expect(model.max_tokens).toBe(row.max_completion_tokens!)
      expect(model.lifecycle).toBe('active')
    }
    expect(page.data[0]!.display_name).toBe('GLM 4.6')
  })

  test('auto-pagination walks every page with a small limit, forwards and backwards', async () => {
    const seen: string[] = []
    for await (const model of client.models.list({ limit: 1 })) seen.push(model.id)
    expect(seen).toEqual(SERVED)

    const pages: { ids: string[]; hasMore: boolean }[] = []
    for await (const page of (await client.models.list({ limit: 2 })).iterPages()) {
      pages.push({ ids: page.data.map((m) => m.id), hasMore: page.has_more })
    }
    expect(pages).toEqual([
      { ids: ['glm-4.6', 'llama-3.3-70b'], hasMore: true },
      { ids: ['qwen3-4b'], hasMore: false },
    ])

    // before_id: the page just before it, then the SDK asks before that page's first_id.
    const backwards = await client.models.list({ before_id: 'qwen3-4b', limit: 1 })
    expect(backwards.data.map((m) => m.id)).toEqual(['llama-3.3-70b'])
    expect(backwards.has_more).toBe(true)
    const earlier = await backwards.getNextPage()
    expect(earlier.data.map((m) => m.id)).toEqual(['glm-4.6'])
    expect(earlier.has_more).toBe(false)
    expect(earlier.hasNextPage()).toBe(false)

    const past = await client.models.list({ after_id: 'svc/qwen3-4b' })
    expect(past.data).toEqual([])
    expect(past.first_id).toBeNull()
    expect(past.last_id).toBeNull()
  })

  test('a lifecycle filter: every model here is active', async () => {
    expect((await client.models.list({ lifecycle: ['active'] })).data.map((m) => m.id)).toEqual(SERVED)
    expect((await client.models.list({ lifecycle: ['deprecated', 'retired'] })).data).toEqual([])
  })

  test('every id listed is one /v1/messages takes', async () => {
    await simOffer(stack, 40)
    const buyer = await fundedBuyer(stack, '1.000000')
    const paying = new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
    for await (const model of paying.models.list()) {
      const message = await paying.messages.create({
        model: model.id,
        max_tokens: 3,
        messages: [{ role: 'user', content: 'hi' }],
      })
      expect(message.type).toBe('message')
    }
  })
})

describe('models.retrieve', () => {
  test('by bare slug or svc/ id: the item the list holds, with the bare slug', async () => {
    const [listed] = (await client.models.list({ limit: 1 })).data
    expect(await client.models.retrieve('glm-4.6')).toEqual(listed!)
    expect(await client.models.retrieve('svc/glm-4.6')).toEqual(listed!)
  })

  for (const [why, id] of [
    ['unknown', 'no-such-model'],
    ['an image model', 'flux-dev'],
    ['a video model', 'wan-2.1-video'],
    ['not live yet', 'deepseek-r2-preview'],
    ['offline upstream', 'mistral-retired'],
  ]) {
    test(`${why}: 404 not_found_error in Anthropic's shape`, async () => {
      const { status, body } = await refusal(client.models.retrieve(id!))
      expect(status).toBe(404)
      expect(body.type).toBe('error')
      expect(body.error).toMatchObject({ type: 'not_found_error', code: 'model_not_found' })
      expect(body.error.message).toContain(id!)
    })
  }

  test('without anthropic-version the same routes still answer the OpenAI catalog row and error', async () => {
    const row = await (await fetch(`${stack.url}/v1/models/glm-4.6`)).json()
    expect(row).toEqual(rowOf('glm-4.6'))
    const missing = await fetch(`${stack.url}/v1/models/flux-2`)
    expect(((await missing.json()) as { type?: string; error: { type: string } }).type).toBeUndefined()
  })
})

describe('a bad query', () => {
  const bad: [string, Anthropic.ModelListParams | string][] = [
    ['limit 0', { limit: 0 }],
    ['limit over 1000', { limit: 1001 }],
    ['limit not a number', '?limit=ten'],
    ['limit a fraction', '?limit=1.5'],
    ['an unknown after_id', { after_id: 'no-such-model' }],
    ['an unknown before_id', { before_id: 'flux-dev' }],
    ['before_id and after_id', { before_id: 'qwen3-4b', after_id: 'glm-4.6' }],
    ['an unknown lifecycle', '?lifecycle[]=beta'],
  ]
  for (const [why, params] of bad) {
    test(`${why}: 400 invalid_request_error, nothing written`, async () => {
      const before = await snapshotKeys(stack.store, stack.keys.prefix)
      const call =
        typeof params === 'string'
          ? client.get(`/v1/models${params}`)
          : client.models.list(params as Anthropic.ModelListParams)
      const { status, body } = await refusal(call)
      expect(status).toBe(400)
      expect(body.type).toBe('error')
      expect(body.error.type).toBe('invalid_request_error')
      expect(body.error.code).toMatch(/^invalid_(limit|cursor|lifecycle)$/)
      expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    })
  }
})
