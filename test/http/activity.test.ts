// GET /v1/agent/activity and GET /v1/agent/usage over real HTTP, with the simulated supplier:
// paging newest first while new requests are written (no gaps, no repeats), usage per UTC day by
// model equal to what the requests were charged, and every bad query a 400 that changes nothing.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { formatMicros } from '../../src/money/units.ts'
import { keyFetch, type TestAccount, waitForLastUsed } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40, { capacityDiem: '1000' })
})
afterAll(() => stack.stop())

interface Item {
  supportReference: string
  model: string
  keyId: string
  status: string
  costUsdc: string
  clearingPriceCents: number | null
  inputTokens: number | null
  outputTokens: number | null
  createdAt: string
}
interface Page {
  object: 'list'
  data: Item[]
  nextCursor: string | null
}

const MODELS = ['llama-3.3-70b', 'qwen3-4b']

async function chat(buyer: TestAccount, model: string) {
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 },
  })
  expect(response.status).toBe(200)
  await response.arrayBuffer()
  return {
    reference: response.headers.get('x-svc-support-reference')!,
    cost: Math.round(Number(response.headers.get('x-svc-cost-usdc')) * 1e6),
    model,
  }
}

const page = async (buyer: TestAccount, query: string) => {
  const response = await keyFetch(stack, buyer.apiKey, `/v1/agent/activity${query}`)
  expect(response.status).toBe(200)
  return (await response.json()) as Page
}

describe('GET /v1/agent/activity', () => {
  test('pages newest first with a cursor: no gaps and no repeats while requests are written', async () => {
    const buyer = await fundedBuyer(stack)
    const made: Awaited<ReturnType<typeof chat>>[] = []
    for (let i = 0; i < 23; i++) made.push(await chat(buyer, MODELS[i % 2]!))
    const first = await page(buyer, '?limit=5')
    expect(first.object).toBe('list')
    expect(first.data.map((d) => d.supportReference)).toEqual(
      made
        .slice(-5)
        .reverse()
        .map((m) => m.reference),
    )
    const item = first.data[0]!
    const last = made.at(-1)!
    expect(item).toEqual({
      supportReference: last.reference,
      model: last.model,
      keyId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      status: 'completed',
      costUsdc: formatMicros(last.cost),
      clearingPriceCents: 40,
      inputTokens: expect.any(Number),
      outputTokens: 5,
      createdAt: expect.any(String),
    })
    // Keep writing while the rest is paged through.
    let writing = true
    const writer = (async () => {
      let n = 0
      while (writing && n < 40) {
        await chat(buyer, MODELS[0]!)
        n++
      }
    })()
    const seen = [...first.data]
    let cursor = first.nextCursor
    while (cursor) {
      const next = await page(buyer, `?limit=3&before=${cursor}`)
      seen.push(...next.data)
      cursor = next.nextCursor
    }
    writing = false
    await writer
    expect(seen.map((d) => d.supportReference)).toEqual(made.map((m) => m.reference).reverse())
    const times = seen.map((d) => Date.parse(d.createdAt))
    expect(times).toEqual([...times].sort((a, b) => b - a))
  })

  test('a new account has an empty list', async () => {
    const buyer = await fundedBuyer(stack)
    expect(await page(buyer, '')).toEqual({ object: 'list', data: [], nextCursor: null })
  })

  test('a cursor at the first possible entry, however spelt, pages to an empty list, not an error', async () => {
    const buyer = await fundedBuyer(stack)
    await chat(buyer, MODELS[0]!)
    for (const cursor of ['0-0', '00-0', '0-000']) {
      expect(await page(buyer, `?before=${cursor}`)).toEqual({ object: 'list', data: [], nextCursor: null })
    }
    expect((await page(buyer, '?before=0-1')).data).toEqual([])
  })
})

describe('GET /v1/agent/usage', () => {
  test('per UTC day and by model: what the requests were charged and how many were served', async () => {
    const buyer = await fundedBuyer(stack)
    const made: Awaited<ReturnType<typeof chat>>[] = []
    for (let i = 0; i < 6; i++) made.push(await chat(buyer, MODELS[i % 3 === 0 ? 1 : 0]!))
    const response = await keyFetch(stack, buyer.apiKey, '/v1/agent/usage?window=7d')
    expect(response.status).toBe(200)
    const usage = (await response.json()) as {
      object: string
      window: string
      costUsdc: string
      requests: number
      days: {
        date: string
        costUsdc: string
        requests: number
        models: { model: string; costUsdc: string; requests: number }[]
      }[]
    }
    expect(usage.object).toBe('usage')
    expect(usage.days).toHaveLength(7)
    const total = made.reduce((sum, m) => sum + m.cost, 0)
    expect(usage.costUsdc).toBe(formatMicros(total))
    expect(usage.requests).toBe(6)
    const today = usage.days.at(-1)!
    expect(today.date).toBe(new Date().toISOString().slice(0, 10))
    const byModel = (model: string) => made.filter((m) => m.model === model)
    expect(today.models).toEqual(
      [...MODELS].sort().map((model) => ({
        model,
        costUsdc: formatMicros(byModel(model).reduce((sum, m) => sum + m.cost, 0)),
        requests: byModel(model).length,
      })),
    )
    for (const day of usage.days.slice(0, -1))
      expect(day).toMatchObject({ costUsdc: '0.000000', requests: 0 })
    const day = (await (await keyFetch(stack, buyer.apiKey, '/v1/agent/usage?window=24h')).json()) as {
      days: unknown[]
      costUsdc: string
    }
    expect(day.days).toHaveLength(1)
    expect(day.costUsdc).toBe(formatMicros(total))
  })
})

describe('bad queries change nothing', () => {
  test('a bad limit, cursor or window is a 400 in the error shape; no key is a 401', async () => {
    const buyer = await fundedBuyer(stack)
    await chat(buyer, MODELS[0]!)
    await waitForLastUsed(stack, buyer.apiKey)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const bad = [
      '/v1/agent/activity?limit=0',
      '/v1/agent/activity?limit=201',
      '/v1/agent/activity?limit=abc',
      '/v1/agent/activity?limit=-1',
      '/v1/agent/activity?limit=1.5',
      '/v1/agent/activity?before=nope',
      '/v1/agent/activity?before=1-2-3',
      '/v1/agent/activity?before=',
      '/v1/agent/usage?window=1h',
      '/v1/agent/usage?window=',
    ]
    for (const path of bad) {
      const response = await keyFetch(stack, buyer.apiKey, path)
      const body = (await response.json()) as { error: { type: string; code: string; message: string } }
      expect([path, response.status, body.error.type]).toEqual([path, 400, 'invalid_request_error'])
    }
    for (const path of ['/v1/agent/activity', '/v1/agent/usage']) {
      expect((await keyFetch(stack, null, path)).status).toBe(401)
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})
