// Cache reads, cache writes and long prompts billed end to end: a real gateway and Redis, the
// simulated supplier reporting cache usage on glm-4.6 (cache prices and a long-prompt tier past
// 2,000 prompt tokens). Every path (buffered, streamed, Responses, the estimate after a cut) must
// charge the upstream's own bill, which the supplier's key is debited by, and nothing else.
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { type ChatMessageLike, promptTokenCount } from '../../src/inference/tokens.ts'
import { formatMicros, parseMicros } from '../../src/money/units.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import {
  balances,
  fundedBuyer,
  type SimOffer,
  simKey,
  simKeyState,
  simOffer,
  sseData,
} from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

const ASK = 40

/** glm-4.6 as the simulated supplier lists it, micro-DIEM per million tokens. */
const BASE = { input: 850_000, output: 2_750_000, cacheInput: 110_000, cacheWrite: 1_050_000 }
const EXTENDED = { input: 1_700_000, output: 4_125_000, cacheInput: 220_000, cacheWrite: 2_100_000 }
const THRESHOLD = 2_000

interface SupplierUsage {
  prompt_tokens: number
  completion_tokens: number
  prompt_tokens_details?: { cached_tokens?: number; cache_creation_input_tokens?: number }
}

/** The upstream's bill, by its published rules, written out term by term: one sum, rounded up once. */
function upstreamBill(usage: SupplierUsage): number {
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0
  const written = usage.prompt_tokens_details?.cache_creation_input_tokens ?? 0
  const rates = usage.prompt_tokens > THRESHOLD ? EXTENDED : BASE
  const term = (tokens: number, price: number) => BigInt(tokens) * BigInt(price)
  const micro =
    term(usage.prompt_tokens - cached - written, rates.input) +
    term(cached, rates.cacheInput) +
    term(written, rates.cacheWrite) +
    term(usage.completion_tokens, rates.output)
  return Number((micro + 999_999n) / 1_000_000n)
}

const charge = (burn: number) => Math.ceil((burn * ASK) / 100)

let stack: TestStack
let buyer: TestAccount
let offer: SimOffer

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 12 } })
  offer = await simOffer(stack, ASK)
  buyer = await fundedBuyer(stack, '10.000000')
})
afterAll(() => stack.stop())
afterEach(() => {
  stack.sim.settings.cachedTokens = null
  stack.sim.settings.cacheWriteTokens = null
})

/** A prompt of about `tokens` tokens as the simulated supplier counts them (four characters each). */
const promptOf = (tokens: number) => 'markets clear '.repeat(Math.ceil((tokens * 4) / 14))

function post(path: string, body: Record<string, unknown>) {
  return fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'svc/glm-4.6', ...body }),
  })
}

async function requestRecord(reference: string) {
  const response = await fetch(`${stack.url}/v1/agent/requests/${reference}`, {
    headers: { authorization: `Bearer ${buyer.apiKey}` },
  })
  return (await response.json()) as Record<string, unknown>
}

/** The supplier key's DIEM balance on the simulated upstream, micro-DIEM. */
async function upstreamBalance(): Promise<number> {
  return parseMicros((await simKeyState(stack, offer.upstreamKey)).balanceDiem)!
}

/** Runs a request and checks that its burn, charge and the supplier key's debit are `bill`. */
async function expectCharged(
  send: () => Promise<{ charged: string; reference: string; usage: SupplierUsage | null }>,
): Promise<{ usage: SupplierUsage | null; bill: number; record: Record<string, unknown> }> {
  const before = await balances(stack, buyer.accountId)
  const upstreamBefore = await upstreamBalance()
  const { charged, reference, usage } = await send()
  const record = await requestRecord(reference)
  const bill = usage ? upstreamBill(usage) : parseMicros(record.burnDiem as string)!
  expect(record.burnDiem).toBe(formatMicros(bill))
  expect(charged).toBe(formatMicros(charge(bill)))
  const after = await balances(stack, buyer.accountId)
  expect(after.spent - before.spent).toBe(charge(bill))
  expect(after.held).toBe(0)
  // what the supplier's key was debited upstream is what its offer was burned for
  expect(upstreamBefore - (await upstreamBalance())).toBe(bill)
  expect(record.upstreamCostDiem).toBeNull()
  return { usage, bill, record }
}

describe('cache reads and writes', () => {
  test('buffered: cached and written prompt tokens at their prices, the cost headers and spent agree', async () => {
    stack.sim.settings.cachedTokens = 300
    stack.sim.settings.cacheWriteTokens = 40
    const { usage, bill } = await expectCharged(async () => {
      const response = await post('/v1/chat/completions', {
        messages: [{ role: 'user', content: promptOf(500) }],
      })
      expect(response.status).toBe(200)
      const body = (await response.json()) as { usage: SupplierUsage }
      return {
        charged: response.headers.get('x-svc-cost-usdc')!,
        reference: response.headers.get('x-svc-support-reference')!,
        usage: body.usage,
      }
    })
    expect(usage!.prompt_tokens_details).toEqual({ cached_tokens: 300, cache_creation_input_tokens: 40 })
    expect(usage!.prompt_tokens).toBeLessThan(THRESHOLD)
    // the cache read is cheaper than the same tokens at input: the buyer no longer pays for them so
    expect(bill).toBeLessThan(upstreamBill({ ...usage!, prompt_tokens_details: {} }))
  })

  test('Messages: the same bill, and the usage names the cache reads and writes', async () => {
    stack.sim.settings.cachedTokens = 250
    stack.sim.settings.cacheWriteTokens = 30
    let message: { usage: Record<string, number | null> } | null = null
    await expectCharged(async () => {
      const response = await post('/v1/messages', {
        max_tokens: 64,
        messages: [{ role: 'user', content: promptOf(450) }],
      })
      expect(response.status).toBe(200)
      message = (await response.json()) as { usage: Record<string, number | null> }
      const { input_tokens, cache_read_input_tokens, cache_creation_input_tokens, output_tokens } =
        message.usage as Record<string, number>
      return {
        charged: response.headers.get('x-svc-cost-usdc')!,
        reference: response.headers.get('x-svc-support-reference')!,
        usage: {
          prompt_tokens: input_tokens! + cache_read_input_tokens! + cache_creation_input_tokens!,
          completion_tokens: output_tokens!,
          prompt_tokens_details: {
            cached_tokens: cache_read_input_tokens!,
            cache_creation_input_tokens: cache_creation_input_tokens!,
          },
        },
      }
    })
    expect(message!.usage.cache_read_input_tokens).toBe(250)
    expect(message!.usage.cache_creation_input_tokens).toBe(30)
  })

  test('Messages streamed: message_delta carries the bill and names the cache reads and writes', async () => {
    stack.sim.settings.cachedTokens = 150
    stack.sim.settings.cacheWriteTokens = 70
    let usage: Record<string, number> = {}
    await expectCharged(async () => {
      const response = await post('/v1/messages', {
        max_tokens: 64,
        messages: [{ role: 'user', content: promptOf(450) }],
        stream: true,
      })
      expect(response.status).toBe(200)
      const events = (await response.text())
        .split('\n\n')
        .filter((block) => block.startsWith('event: message_delta\n'))
      expect(events).toHaveLength(1)
      const delta = JSON.parse(events[0]!.split('data: ')[1]!) as {
        usage: Record<string, number>
        costUsdc: string
        supportReference: string
      }
      usage = delta.usage
      return {
        charged: delta.costUsdc,
        reference: delta.supportReference,
        usage: {
          prompt_tokens:
            usage.input_tokens! + usage.cache_read_input_tokens! + usage.cache_creation_input_tokens!,
          completion_tokens: usage.output_tokens!,
          prompt_tokens_details: {
            cached_tokens: usage.cache_read_input_tokens!,
            cache_creation_input_tokens: usage.cache_creation_input_tokens!,
          },
        },
      }
    })
    expect(usage.cache_read_input_tokens).toBe(150)
    expect(usage.cache_creation_input_tokens).toBe(70)
  })

  test('streamed: the svc.cost frame carries the same bill', async () => {
    stack.sim.settings.cachedTokens = 200
    stack.sim.settings.cacheWriteTokens = 100
    const { usage } = await expectCharged(async () => {
      const response = await post('/v1/chat/completions', {
        messages: [{ role: 'user', content: promptOf(400) }],
        stream: true,
      })
      expect(response.status).toBe(200)
      const frames = sseData(await response.text())
      const usageChunk = frames.find((f) => typeof f === 'object' && f.usage) as { usage: SupplierUsage }
      const cost = frames.find((f) => typeof f === 'object' && f.object === 'svc.cost') as {
        costUsdc: string
      }
      return {
        charged: cost.costUsdc,
        reference: response.headers.get('x-svc-support-reference')!,
        usage: usageChunk.usage,
      }
    })
    expect(usage!.prompt_tokens_details).toEqual({ cached_tokens: 200, cache_creation_input_tokens: 100 })
  })

  test('by default a cache-priced model reads the conversation so far from the cache', async () => {
    const { usage } = await expectCharged(async () => {
      const response = await post('/v1/chat/completions', {
        messages: [
          { role: 'system', content: promptOf(300) },
          { role: 'user', content: 'and now?' },
        ],
      })
      const body = (await response.json()) as { usage: SupplierUsage }
      return {
        charged: response.headers.get('x-svc-cost-usdc')!,
        reference: response.headers.get('x-svc-support-reference')!,
        usage: body.usage,
      }
    })
    expect(usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(300)
  })
})

describe('the Responses API', () => {
  test('buffered: the cost header is the bill; cached tokens are shown in input_tokens_details', async () => {
    stack.sim.settings.cachedTokens = 250
    stack.sim.settings.cacheWriteTokens = 25
    let inputTokens = 0
    await expectCharged(async () => {
      const response = await post('/v1/responses', { input: promptOf(400) })
      expect(response.status).toBe(200)
      const body = (await response.json()) as {
        usage: {
          input_tokens: number
          output_tokens: number
          input_tokens_details: { cached_tokens: number }
        }
      }
      expect(body.usage.input_tokens_details.cached_tokens).toBe(250)
      inputTokens = body.usage.input_tokens
      return {
        charged: response.headers.get('x-svc-cost-usdc')!,
        reference: response.headers.get('x-svc-support-reference')!,
        usage: {
          prompt_tokens: body.usage.input_tokens,
          completion_tokens: body.usage.output_tokens,
          prompt_tokens_details: { cached_tokens: 250, cache_creation_input_tokens: 25 },
        },
      }
    })
    expect(inputTokens).toBeGreaterThan(275)
  })

  test('streamed: response.completed carries the bill', async () => {
    stack.sim.settings.cachedTokens = 120
    stack.sim.settings.cacheWriteTokens = 60
    await expectCharged(async () => {
      const response = await post('/v1/responses', { input: promptOf(400), stream: true })
      expect(response.status).toBe(200)
      const frames = sseData(await response.text())
      const completed = frames.find((f) => typeof f === 'object' && f.type === 'response.completed') as {
        costUsdc: string
        supportReference: string
        response: { usage: { input_tokens: number; output_tokens: number } }
      }
      return {
        charged: completed.costUsdc,
        reference: completed.supportReference,
        usage: {
          prompt_tokens: completed.response.usage.input_tokens,
          completion_tokens: completed.response.usage.output_tokens,
          prompt_tokens_details: { cached_tokens: 120, cache_creation_input_tokens: 60 },
        },
      }
    })
  })
})

describe('long prompts', () => {
  test('past the threshold every term is at the extended prices, buffered and streamed', async () => {
    stack.sim.settings.cachedTokens = 1_000
    stack.sim.settings.cacheWriteTokens = 300
    for (const stream of [false, true]) {
      const { usage } = await expectCharged(async () => {
        const response = await post('/v1/chat/completions', {
          messages: [{ role: 'user', content: promptOf(2_200) }],
          stream,
        })
        expect(response.status).toBe(200)
        const reference = response.headers.get('x-svc-support-reference')!
        if (!stream) {
          const body = (await response.json()) as { usage: SupplierUsage }
          return { charged: response.headers.get('x-svc-cost-usdc')!, reference, usage: body.usage }
        }
        const frames = sseData(await response.text())
        const usageChunk = frames.find((f) => typeof f === 'object' && f.usage) as { usage: SupplierUsage }
        const cost = frames.find((f) => typeof f === 'object' && f.object === 'svc.cost') as {
          costUsdc: string
        }
        return { charged: cost.costUsdc, reference, usage: usageChunk.usage }
      })
      expect(usage!.prompt_tokens).toBeGreaterThan(THRESHOLD)
    }
  })

  test('a stream cut before usage is billed on estimate: the prompt at extended input past the threshold', async () => {
    await simKey(stack, offer.upstreamKey, { fault: 'truncate', times: 1 })
    // the tokenizer counts this text at about half the simulated upstream's four characters a token
    const messages: ChatMessageLike[] = [{ role: 'user', content: promptOf(5_000) }]
    const response = await post('/v1/chat/completions', { messages, stream: true })
    await response.text()
    const record = await requestRecord(response.headers.get('x-svc-support-reference')!)
    const usage = record.usage as { inputTokens: number; outputTokens: number; estimated: boolean }
    expect(usage.estimated).toBe(true)
    // no cache counts came: the prompt is all at input, the tokenizer's count past the threshold
    expect(usage.inputTokens).toBe(await promptTokenCount(messages))
    expect(usage.inputTokens).toBeGreaterThan(THRESHOLD)
    expect(usage.outputTokens).toBeGreaterThan(0)
    const bill = upstreamBill({ prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens })
    expect(record.burnDiem).toBe(formatMicros(bill))
    expect(record.costUsdc).toBe(formatMicros(charge(bill)))
  })
})

describe("the upstream's own cost", () => {
  test('a cost that disagrees with the bill is recorded on the request, never charged', async () => {
    // A supplier of the test's own: honest usage, a cost figure far from its own formula.
    const usage = {
      prompt_tokens: 1_000,
      completion_tokens: 10,
      total_tokens: 1_010,
      prompt_tokens_details: { cached_tokens: 400, cache_creation_input_tokens: 100 },
    }
    const liar = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch: () =>
        Response.json({
          id: 'chatcmpl-liar',
          object: 'chat.completion',
          created: 1,
          model: 'glm-4.6',
          choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
          usage,
          cost: { diem: 0.5, usd: 0.5 },
        }),
    })
    try {
      const cheaper = await fetch(`${stack.url}/admin/v1/offers/${offer.id}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${stack.config.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ status: 'paused' }),
      })
      expect(cheaper.status).toBe(200)
      const own = await simOfferAt(liar.url.origin)
      const before = await balances(stack, buyer.accountId)
      const disagreementsBefore = await disagreements()
      // A prompt whose bound holds the 1,000 tokens reported: the report is honest.
      const content = 'hello '.repeat(200)
      const response = await post('/v1/chat/completions', { messages: [{ role: 'user', content }] })
      expect(response.status).toBe(200)
      const bill = upstreamBill(usage)
      expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(charge(bill)))
      expect((await balances(stack, buyer.accountId)).spent - before.spent).toBe(charge(bill))
      const reference = response.headers.get('x-svc-support-reference')!
      const record = await requestRecord(reference)
      expect(record.burnDiem).toBe(formatMicros(bill))
      expect(record.upstreamCostDiem).toBe('0.500000')
      expect((await attemptRecord(stack.store, stack.keys.attempt(`${reference}.1`))).upstreamCost).toBe(
        '500000',
      )
      expect(await disagreements()).toBe(disagreementsBefore + 1)
      await fetch(`${stack.url}/admin/v1/offers/${own}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${stack.config.adminToken}` },
      })
    } finally {
      await fetch(`${stack.url}/admin/v1/offers/${offer.id}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${stack.config.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ status: 'active' }),
      })
      liar.stop(true)
    }
  })
})

/** An offer on another upstream at the same ask, its id. */
async function simOfferAt(upstreamBaseUrl: string): Promise<string> {
  const response = await fetch(`${stack.url}/admin/v1/offers`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.config.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ upstreamBaseUrl, upstreamApiKey: 'liar-key', askCents: ASK, capacityDiem: '50' }),
  })
  expect(response.status).toBe(201)
  return ((await response.json()) as { id: string }).id
}

/** svc_upstream_cost_disagreements_total as /metrics shows it (0 before the first). */
async function disagreements(): Promise<number> {
  const response = await fetch(`${stack.url}/metrics`, {
    headers: { authorization: `Bearer ${stack.config.adminToken}` },
  })
  const match = /^svc_upstream_cost_disagreements_total (\d+)$/m.exec(await response.text())
  return match ? Number(match[1]) : 0
}
