// The upstream's price list moves money only as checked: a real gateway and Redis, the catalog read
// from a `/models` of the test's own (its list changed at will) in front of the simulated supplier,
// which debits its keys at its own list. A request is billed at the price it was admitted and held
// at, whatever the list says by the time it clears; a list that contradicts itself (one model under
// ids apart only by case or space, a long-prompt tier priced at nothing, usd and diem that disagree)
// bills at none of its prices; prices in any shape never answer a buyer with a 500.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { CatalogStore } from '../../src/catalog/store.ts'
import { syncCatalog } from '../../src/catalog/sync.ts'
import { parseMicros } from '../../src/money/units.ts'
import { SIM_MODELS, type VeniceModel } from '../../src/sim/models.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { balances, expectedCost, fundedBuyer, postOffer, simKeyState, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const ASK = 40
const MODEL = 'llama-3.3-70b'
const llama = SIM_MODELS.find((m) => m.id === MODEL)!
const qwen = SIM_MODELS.find((m) => m.id === 'qwen3-4b')!

/** llama as listed, with its pricing (or its id) replaced. */
function relisted(pricing: Record<string, unknown>, id = MODEL): VeniceModel {
  return { ...llama, id, model_spec: { ...llama.model_spec, pricing } } as VeniceModel
}

/** One amount as the upstream lists it: equal usd and diem. */
const usd = (amount: unknown) => ({ usd: amount, diem: amount })

let list: unknown[] = [llama, qwen]
/** How `/models` answers: the list, a 500, a body that is not JSON, or a head and then nothing. */
let listing: 'list' | 'error' | 'garbage' | 'stall' = 'list'
let stack: TestStack
let buyer: TestAccount
let upstreamKey: string

/**
 * The upstream the catalog and the offer name: its `/models` is the test's list; every other call
 * goes to the simulated supplier with the model id folded to lower case and trimmed, as an upstream
 * that matches ids so would take it.
 */
const upstream = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: async (request) => {
    const url = new URL(request.url)
    if (url.pathname === '/models') return listModels()
    let body: string | undefined
    if (request.method === 'POST') {
      const sent = JSON.parse(await request.text()) as { model?: unknown }
      if (typeof sent.model === 'string') sent.model = sent.model.trim().toLowerCase()
      body = JSON.stringify(sent)
    }
    const headers = new Headers(request.headers)
    headers.delete('host')
    headers.delete('content-length')
    const answer = await fetch(`${stack.sim.url}${url.pathname}${url.search}`, {
      method: request.method,
      headers,
      body,
      signal: request.signal,
    })
    return new Response(answer.body, { status: answer.status, headers: answer.headers })
  },
})
const upstreamUrl = `http://127.0.0.1:${upstream.port}`

function listModels(): Response {
  if (listing === 'error') return Response.json({ error: 'down' }, { status: 500 })
  if (listing === 'garbage') return new Response('<html>maintenance</html>')
  if (listing === 'list') return Response.json({ object: 'list', data: list })
  const head = JSON.stringify({ object: 'list', data: list }).slice(0, 40)
  return new Response(new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode(head)) }))
}

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 }, env: { SVC_UPSTREAM_URL: upstreamUrl } })
  upstreamKey = (await postOffer(stack, upstreamUrl, ASK)).upstreamKey
  buyer = await fundedBuyer(stack, '10.000000')
})
afterAll(async () => {
  await stack.stop()
  upstream.stop(true)
})

/** The upstream lists `models`, a sync writes them, and the gateway serves the list written. */
async function relist(models: unknown[]) {
  list = models
  const catalog = new CatalogStore(stack.store, stack.keys)
  await syncCatalog(catalog, { upstreamUrl, disabledModels: [] })
  const written = JSON.stringify([...(await catalog.all()).values()].map((e) => e.row))
  await until(async () => {
    const served = (await (await fetch(`${stack.url}/v1/models`)).json()) as { data: unknown[] }
    return JSON.stringify(served.data) === written
  })
}

/** The gateway's row of `id` (null: not on the list). */
async function row(id: string): Promise<{ status: string; pricing?: Record<string, unknown> } | null> {
  const response = await fetch(`${stack.url}/v1/models/${encodeURIComponent(id)}`)
  return response.status === 404 ? null : ((await response.json()) as { status: string })
}

function chat(model: string, extra: Record<string, unknown> = {}) {
  return fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'what do markets do?' }], ...extra }),
  })
}

const keyBalance = async () => parseMicros((await simKeyState(stack, upstreamKey)).balanceDiem)!

/**
 * Streams a chat held at its first token while `change` moves the list, then lets it finish: the
 * stream's usage and cost frame, and its attempt's record.
 */
async function streamAcrossChange(change: () => Promise<void>) {
  stack.sim.settings.holdFirstToken = true
  const pending = chat(MODEL, { stream: true, max_tokens: 50 })
  await until(async () => (await balances(stack, buyer.accountId)).held > 0)
  await change()
  stack.sim.releaseFirstTokens()
  const response = await pending
  expect(response.status).toBe(200)
  const frames = sseData(await response.text())
  const usage = frames.find((f) => typeof f === 'object' && f.usage) as {
    usage: { prompt_tokens: number; completion_tokens: number }
  }
  const cost = frames.find((f) => typeof f === 'object' && f.object === 'svc.cost') as { costUsdc: string }
  const reference = response.headers.get('x-svc-support-reference')!
  const record = await attemptRecord(stack.store, stack.keys.attempt(`${reference}.1`))
  return { usage: usage.usage, cost: parseMicros(cost.costUsdc)!, record }
}

/** The burn of a usage at llama's own list (0.70 / 2.80 per million), rounded up once. */
const listBurn = (u: { prompt_tokens: number; completion_tokens: number }) =>
  Math.ceil((u.prompt_tokens * 700_000 + u.completion_tokens * 2_800_000) / 1_000_000)

test('a price raised between admission and clear: billed at the price admitted and held, the next at the new', async () => {
  await relist([llama, qwen])
  const before = await balances(stack, buyer.accountId)
  const keyBefore = await keyBalance()
  const dearer = relisted({ input: usd(7), output: usd(28) })
  const { usage, cost, record } = await streamAcrossChange(() => relist([dearer, qwen]))
  expect((await row(MODEL))!.pricing!.input).toBe('7.000000')
  // The buyer agreed to the list at admission, and the hold was taken at it: that price bills.
  expect(cost).toBe(expectedCost(usage, ASK))
  expect(Number(record.burn)).toBe(listBurn(usage))
  expect(Number(record.burn)).toBeLessThanOrEqual(Number(record.holdDiem))
  expect(Number(record.cost)).toBeLessThanOrEqual(Number(record.holdUsdc))
  // ...which is what the upstream debited the supplier's key: it earns on no price the buyer did not see.
  expect(keyBefore - (await keyBalance())).toBe(listBurn(usage))
  const after = await balances(stack, buyer.accountId)
  expect(after.held).toBe(0)
  expect(after.spent - before.spent).toBe(cost)
  // A request admitted after the change is held and billed at the new list.
  const next = await chat(MODEL)
  expect(next.status).toBe(200)
  const body = (await next.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }
  const charged = parseMicros(next.headers.get('x-svc-cost-usdc')!)!
  expect(charged).toBe(expectedCost(body.usage, ASK, { input: 7_000_000, output: 28_000_000 }))
})

test('a model that leaves the list mid-stream is cleared at its admitted price; the next call is a 404', async () => {
  await relist([llama, qwen])
  const before = await balances(stack, buyer.accountId)
  const { usage, cost, record } = await streamAcrossChange(() => relist([qwen]))
  expect(await row(MODEL)).toBeNull()
  expect(cost).toBe(expectedCost(usage, ASK))
  expect(Number(record.burn)).toBe(listBurn(usage))
  const after = await balances(stack, buyer.accountId)
  expect(after).toEqual({ ...before, confirmed: before.confirmed - cost, spent: before.spent + cost })
  const next = await chat(MODEL)
  expect(next.status).toBe(404)
  expect(((await next.json()) as { error: { code: string } }).error.code).toBe('model_not_found')
  expect(await balances(stack, buyer.accountId)).toEqual(after)
})

test('a list that fails, is not JSON or stalls mid-body keeps the last good one: requests bill at it', async () => {
  await relist([llama, qwen])
  for (const failing of ['error', 'garbage', 'stall'] as const) {
    listing = failing
    list = [relisted({ input: usd(0.01), output: usd(0.01) }), qwen]
    const source = { upstreamUrl, disabledModels: [], timeoutMs: 500 }
    await expect(syncCatalog(new CatalogStore(stack.store, stack.keys), source)).rejects.toThrow()
    listing = 'list'
    expect((await row(MODEL))!.pricing!.input).toBe('0.700000')
    const before = await balances(stack, buyer.accountId)
    const keyBefore = await keyBalance()
    const response = await chat(MODEL)
    expect(response.status).toBe(200)
    const { usage } = (await response.json()) as {
      usage: { prompt_tokens: number; completion_tokens: number }
    }
    // Never a default of nothing, nor the list the failed answer began: the last good list's price.
    expect(parseMicros(response.headers.get('x-svc-cost-usdc')!)).toBe(expectedCost(usage, ASK))
    expect((await balances(stack, buyer.accountId)).spent - before.spent).toBe(expectedCost(usage, ASK))
    expect(keyBefore - (await keyBalance())).toBe(listBurn(usage))
  }
})

const contradictions: [string, unknown[], string][] = [
  [
    'the same model under an id apart only in case, cheaper',
    [llama, relisted({ input: usd(0.01), output: usd(0.01) }, 'LLAMA-3.3-70B')],
    'LLAMA-3.3-70B',
  ],
  [
    'the same model under an id apart only in surrounding space, cheaper',
    [llama, relisted({ input: usd(0.01), output: usd(0.01) }, ` ${MODEL} `)],
    ` ${MODEL} `,
  ],
  [
    'a long-prompt tier priced at nothing past one token',
    [
      relisted({
        ...llama.model_spec.pricing,
        extended: { context_token_threshold: 1, input: usd(0), output: usd(0) },
      }),
    ],
    MODEL,
  ],
  [
    'usd and diem that disagree',
    [relisted({ input: { usd: 0.7, diem: 0.007 }, output: { usd: 2.8, diem: 0.028 } })],
    MODEL,
  ],
]

for (const [why, models, id] of contradictions) {
  test(`a list that contradicts itself bills at none of its prices: ${why}`, async () => {
    await relist([...models, qwen])
    const before = await balances(stack, buyer.accountId)
    const keyBefore = await keyBalance()
    const response = await chat(id)
    const after = await balances(stack, buyer.accountId)
    // Served, it would be billed at one price while the upstream debits the supplier's key at another.
    expect({
      status: response.status,
      spentUsdc: after.spent - before.spent,
      keyDebitDiem: keyBefore - (await keyBalance()),
    }).toEqual({ status: 400, spentUsdc: 0, keyDebitDiem: 0 })
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('model_not_live')
    expect(after).toEqual(before)
    expect((await row(id))!.status).toBe('coming_soon')
  })
}

const oddPrices: [string, unknown][] = [
  ['missing', undefined],
  ['zero', usd(0)],
  ['negative', usd(-0.7)],
  ['more than six decimals', usd(0.0000007)],
  ['exponent notation', usd(7e-7)],
  ['an exponent string', usd('7e-1')],
  ['a string', usd('cheap')],
  ['a boolean', usd(true)],
  ['an object', usd({ amount: 1 })],
  ['absurdly large', usd(9_000_000_000)],
  ['past a safe integer', usd('999999999999999')],
]

test('input prices in any shape: a buyer gets a 200, a 4xx or a 503, never a 500, and never pays past the hold', async () => {
  for (const [why, input] of oddPrices) {
    await relist([relisted({ input, output: usd(2.8) }), qwen])
    const before = await balances(stack, buyer.accountId)
    for (const extra of [{}, { stream: true }, { max_tokens: 64 }]) {
      const response = await chat(MODEL, extra)
      const text = await response.text()
      expect({ why, extra, ok: [200, 400, 402, 503].includes(response.status) }).toEqual({
        why,
        extra,
        ok: true,
      })
      if (response.status !== 200) {
        expect(JSON.parse(text).error.code).toBeString()
        continue
      }
      const reference = response.headers.get('x-svc-support-reference')!
      const record = await attemptRecord(stack.store, stack.keys.attempt(`${reference}.1`))
      expect(Number(record.burn)).toBeLessThanOrEqual(Number(record.holdDiem))
      expect(Number(record.cost)).toBeLessThanOrEqual(Number(record.holdUsdc))
    }
    const after = await balances(stack, buyer.accountId)
    expect(after.held).toBe(0)
    expect(after.confirmed + after.spent).toBe(before.confirmed + before.spent)
  }
})
