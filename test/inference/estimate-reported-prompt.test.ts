// An answer billed on estimate after the upstream said how many prompt tokens it read: the upstream
// bills the prompt by its own count, so the estimate takes that count (and its cache split), and
// the long-prompt tier follows it, not the gateway's tokenizer. The count is bounded by the
// request's own prompt bound: a report past it moves no more money than the bound allows.
import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test'
import { promptTokenBound, promptTokenCount } from '../../src/inference/tokens.ts'
import { formatMicros, parseMicros } from '../../src/money/units.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, postOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

const ASK = 40
/** glm-4.6 as the simulated catalog lists it, micro-DIEM per million tokens. */
const BASE = { input: 850_000, output: 2_750_000, cacheInput: 110_000, cacheWrite: 1_050_000 }
const EXTENDED = { input: 1_700_000, output: 4_125_000, cacheInput: 220_000, cacheWrite: 2_100_000 }
const THRESHOLD = 2_000

/** The upstream's bill by billing.md (one sum, rounded up once), from its own count of the prompt. */
function upstreamBill(prompt: number, cached: number, completion: number): number {
  const rates = prompt > THRESHOLD ? EXTENDED : BASE
  const micro = (prompt - cached) * rates.input + cached * rates.cacheInput + completion * rates.output
  return Math.ceil(micro / 1e6)
}

/** About 2,800 bytes: a prompt bound past the threshold, a tokenizer count far below it. */
const MESSAGES = [{ role: 'user', content: 'markets clear '.repeat(200) }]
const BODY = { model: 'svc/glm-4.6', messages: MESSAGES, max_tokens: 64 }

/** What the test's supplier answers: a stream's SSE text, or a buffered JSON body. */
let answer: { sse?: string; json?: Record<string, unknown> } = {}

let stack: TestStack
let buyer: TestAccount
let supplier: ReturnType<typeof Bun.serve>
let offerId: string

beforeAll(async () => {
  supplier = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: () =>
      answer.sse !== undefined
        ? new Response(answer.sse, { headers: { 'content-type': 'text/event-stream' } })
        : Response.json(answer.json),
  })
  stack = await startStack()
  offerId = (await postOffer(stack, `http://127.0.0.1:${supplier.port}`, ASK)).id
  buyer = await fundedBuyer(stack, '10.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop(true)
})
afterEach(() => {
  answer = {}
})

const chunk = (content: string, usage?: Record<string, unknown>) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-e',
    object: 'chat.completion.chunk',
    model: 'glm-4.6',
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
    ...(usage ? { usage } : {}),
  })}\n\n`

/** Usage on the first content chunk, more content after it, then a break: billed on estimate. */
const earlyReportThenBreak = (usage: Record<string, unknown>) =>
  chunk('hello', usage) +
  Array.from({ length: 6 }, () => chunk(' and more words')).join('') +
  `data: ${JSON.stringify({ error: { message: 'gone' } })}\n\n`

async function requestRecord(reference: string) {
  const response = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
  expect(response.status).toBe(200)
  return (await response.json()) as {
    burnDiem: string
    costUsdc: string
    usage: { inputTokens: number; outputTokens: number; estimated: boolean }
  }
}

async function streamed(): Promise<Awaited<ReturnType<typeof requestRecord>>> {
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { ...BODY, stream: true },
  })
  expect(response.status).toBe(200)
  const frames = sseData(await response.text())
  const cost = frames.find((f) => typeof f === 'object' && f.object === 'svc.cost') as {
    costUsdc: string
    supportReference: string
  }
  const record = await requestRecord(cost.supportReference)
  expect(record.costUsdc).toBe(cost.costUsdc)
  return record
}

const charge = (burn: number) => Math.ceil((burn * ASK) / 100)

/** What the test supplier's offer has earned, micro-USDC. */
async function earned(): Promise<number> {
  const view = (await (await adminFetch(stack, `/admin/v1/offers/${offerId}`)).json()) as {
    earnedUsdc: string
  }
  return parseMicros(view.earnedUsdc)!
}

test('a stream cut after an early report: the prompt at the upstream count, extended past the threshold', async () => {
  // The tokenizer alone would bill this prompt below the threshold, at the base prices.
  expect(await promptTokenCount(MESSAGES)).toBeLessThan(THRESHOLD)
  answer = {
    sse: earlyReportThenBreak({
      prompt_tokens: 2_400,
      completion_tokens: 1,
      prompt_tokens_details: { cached_tokens: 1_000 },
    }),
  }
  const earnedBefore = await earned()
  const record = await streamed()
  expect(record.usage.estimated).toBe(true)
  expect(record.usage.inputTokens).toBe(2_400)
  // Everything relayed after the report is counted too: more than its one token.
  expect(record.usage.outputTokens).toBeGreaterThan(1)
  const bill = upstreamBill(2_400, 1_000, record.usage.outputTokens)
  expect(record.burnDiem).toBe(formatMicros(bill))
  expect(parseMicros(record.costUsdc)).toBe(charge(bill))
  // The supplier earns what the buyer paid for that burn (no fee is set).
  expect((await earned()) - earnedBefore).toBe(charge(bill))
})

test("a reported prompt past the request's own bound is billed at the bound, never more", async () => {
  answer = { sse: earlyReportThenBreak({ prompt_tokens: 10_000_000, completion_tokens: 1 }) }
  const record = await streamed()
  const bound = promptTokenBound(MESSAGES, BODY)
  expect(record.usage.estimated).toBe(true)
  expect(record.usage.inputTokens).toBe(bound)
  expect(record.burnDiem).toBe(formatMicros(upstreamBill(bound, 0, record.usage.outputTokens)))
})

test('a reported prompt just past the bound but nearly all cache reads: billed as reported, cheaper than the bound', async () => {
  const bound = promptTokenBound(MESSAGES, BODY)
  answer = {
    sse: earlyReportThenBreak({
      prompt_tokens: bound + 1,
      completion_tokens: 1,
      prompt_tokens_details: { cached_tokens: bound },
    }),
  }
  const record = await streamed()
  expect(record.usage.estimated).toBe(true)
  const output = record.usage.outputTokens
  expect(upstreamBill(bound + 1, bound, output)).toBeLessThan(upstreamBill(bound, 0, output))
  expect(record.usage.inputTokens).toBe(bound + 1)
  expect(record.burnDiem).toBe(formatMicros(upstreamBill(bound + 1, bound, output)))
  expect(parseMicros(record.costUsdc)).toBe(charge(upstreamBill(bound + 1, bound, output)))
})

test('a buffered answer whose usage has its prompt count but no completion count: that prompt count', async () => {
  answer = {
    json: {
      id: 'chatcmpl-b',
      object: 'chat.completion',
      created: 1,
      model: 'glm-4.6',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi there' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 2_400 },
    },
  }
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', { method: 'POST', json: BODY })
  expect(response.status).toBe(200)
  const record = await requestRecord(response.headers.get('x-svc-support-reference')!)
  expect(record.usage.estimated).toBe(true)
  expect(record.usage.inputTokens).toBe(2_400)
  expect(record.usage.outputTokens).toBeGreaterThan(0)
  const bill = upstreamBill(2_400, 0, record.usage.outputTokens)
  expect(record.burnDiem).toBe(formatMicros(bill))
  expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(charge(bill)))
})
