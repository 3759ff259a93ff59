// A supplier's complete usage report that claims more than the request allows: a prompt past the
// request's true prompt bound (tokens.ts promptTokenBound), or more completion tokens than
// max_tokens x n. Nothing the supplier says moves money until checked: the claim is billed at
// what the request allows (a prompt past its bound at the bound, all at the input price, at the
// tier the bound reaches; the completion at its limit), and the rest of the claimed burn is
// disputed, on the record, the offer, the market's totals and /metrics, as burn past the hold is.
// Over real HTTP, against a supplier of the test's own, on chat, Responses and Messages, buffered
// and streamed. An estimate (no report at all) capped at the key's balance is no dispute. The usage
// a buyer is shown (the chat answer's, the stream's usage chunk, its record and activity) is the
// usage it was billed for; a report within the bounds reaches it as the supplier wrote it.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { auditAll } from '../../src/cli/audit.ts'
import { type ChatMessageLike, promptTokenBound } from '../../src/inference/tokens.ts'
import { formatMicros, parseMicros } from '../../src/money/units.ts'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import { fundedBuyer, postOffer } from '../helpers/buyers.ts'
import { metricValue } from '../helpers/metrics.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const ASK = 40

interface Rates {
  input: number
  output: number
  cacheInput?: number
  cacheWrite?: number
}
/** The simulated catalog's prices, micro-DIEM per million tokens. */
const LLAMA: Rates = { input: 700_000, output: 2_800_000 }
const GLM_BASE: Rates = { input: 850_000, output: 2_750_000, cacheInput: 110_000, cacheWrite: 1_050_000 }
const GLM_EXTENDED: Rates = {
  input: 1_700_000,
  output: 4_125_000,
  cacheInput: 220_000,
  cacheWrite: 2_100_000,
}
const GLM_THRESHOLD = 2_000

/** The upstream's bill of a usage by billing.md: one sum over its terms, rounded up once. */
function bill(rates: Rates, u: { prompt: number; cached?: number; written?: number; completion: number }) {
  const cached = u.cached ?? 0
  const written = u.written ?? 0
  const sum =
    BigInt(u.prompt - cached - written) * BigInt(rates.input) +
    BigInt(cached) * BigInt(rates.cacheInput ?? rates.input) +
    BigInt(written) * BigInt(rates.cacheWrite ?? rates.input) +
    BigInt(u.completion) * BigInt(rates.output)
  return Number((sum + 999_999n) / 1_000_000n)
}
const glmRates = (prompt: number) => (prompt > GLM_THRESHOLD ? GLM_EXTENDED : GLM_BASE)
const charge = (burn: number) => Math.ceil((burn * ASK) / 100)

/** What the supplier reports on every answer, chat-shaped (null: a stream ends without it). */
let usage: Record<string, unknown> | null = {}
/** Every body the supplier was sent. */
const received: Record<string, unknown>[] = []

let stack: TestStack
let buyer: TestAccount
let supplier: ReturnType<typeof Bun.serve>
let offerId: string

/** The upstream key whose answers say its balance before the call was one micro-DIEM. */
const POOR_KEY = 'poor-key'

function answer(body: Record<string, unknown>, key: string): Response {
  const n = typeof body.n === 'number' ? body.n : 1
  const base = { id: 'chatcmpl-l', created: 1, model: body.model }
  if (!body.stream) {
    const choices = Array.from({ length: n }, (_, index) => ({
      index,
      message: { role: 'assistant', content: 'hi' },
      finish_reason: 'stop',
    }))
    return Response.json({ ...base, object: 'chat.completion', choices, usage })
  }
  const headers = {
    'content-type': 'text/event-stream',
    ...(key === POOR_KEY ? { 'x-venice-balance-diem': '0.000001' } : {}),
  }
  const frames = [
    { ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'hi' } }] },
    { ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
    ...(usage === null ? [] : [{ ...base, object: 'chat.completion.chunk', choices: [], usage }]),
  ]
  const text = `${frames.map((f) => `data: ${JSON.stringify(f)}\n\n`).join('')}data: [DONE]\n\n`
  return new Response(text, { headers })
}

beforeAll(async () => {
  supplier = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const body = (await request.json()) as Record<string, unknown>
      received.push(body)
      return answer(body, (request.headers.get('authorization') ?? '').slice(7))
    },
  })
  stack = await startStack()
  offerId = (await postOffer(stack, `http://127.0.0.1:${supplier.port}`, ASK, { capacityDiem: '100' })).id
  buyer = await fundedBuyer(stack, '10.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop(true)
})

const ROUTES = {
  chat: ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hello' }], max_tokens: 20 }],
  responses: ['/v1/responses', { input: 'hello', max_output_tokens: 20 }],
  messages: ['/v1/messages', { messages: [{ role: 'user', content: 'hello' }], max_tokens: 20 }],
} as const

interface RequestRecord {
  status: string
  complete: boolean
  costUsdc: string
  burnDiem: string
  disputedBurnDiem: string
  usage: { inputTokens: number; outputTokens: number; estimated: boolean }
}

const offerView = async () =>
  (await (await adminFetch(stack, `/admin/v1/offers/${offerId}`)).json()) as Record<string, string>
const marketTotals = async () =>
  (await (await adminFetch(stack, '/admin/v1/market')).json()) as Record<string, string>

/** Sends one request, reads its answer to the end, and returns its record once it is cleared. */
async function served(path: string, body: Record<string, unknown>) {
  const sentBefore = received.length
  const response = await keyFetch(stack, buyer.apiKey, path, { method: 'POST', json: body })
  expect(response.status).toBe(200)
  await response.text()
  const ref = response.headers.get('x-svc-support-reference')!
  let record = {} as RequestRecord
  await until(async () => {
    record = (await (
      await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${ref}`)
    ).json()) as RequestRecord
    return record.complete === true
  })
  expect(received.length).toBe(sentBefore + 1)
  const sent = received.at(-1)!
  // What the supplier was sent bounds what it can have read of it.
  const bound = promptTokenBound(sent.messages as ChatMessageLike[], sent)
  const attempt = await attemptRecord(stack.store, stack.keys.attempt(`${ref}.1`))
  return { record, bound, attempt }
}

/** What a clear moved, on the offer, the market and /metrics, across `run`. */
async function disputedAcross<T>(run: () => Promise<T>) {
  const offer = parseMicros((await offerView()).disputedDiem!)!
  const earned = parseMicros((await offerView()).earnedUsdc!)!
  const market = parseMicros((await marketTotals()).disputedBurnDiem!)!
  const metric = await metricValue(stack, 'svc_disputed_burn_microdiem_total')
  const result = await run()
  return {
    result,
    offer: parseMicros((await offerView()).disputedDiem!)! - offer,
    earned: parseMicros((await offerView()).earnedUsdc!)! - earned,
    market: parseMicros((await marketTotals()).disputedBurnDiem!)! - market,
    metric: (await metricValue(stack, 'svc_disputed_burn_microdiem_total')) - metric,
  }
}

describe("a prompt past the request's bound is billed at the bound, the rest disputed", () => {
  for (const [route, [path, body]] of Object.entries(ROUTES)) {
    for (const stream of [false, true]) {
      test(`${route}, ${stream ? 'streamed' : 'buffered'}: 10,000,000 prompt tokens claimed`, async () => {
        usage = { prompt_tokens: 10_000_000, completion_tokens: 2, total_tokens: 10_000_002 }
        const moved = await disputedAcross(() => served(path, { model: 'llama-3.3-70b', ...body, stream }))
        const { record, bound, attempt } = moved.result
        const billed = bill(LLAMA, { prompt: bound, completion: 2 })
        const claimed = bill(LLAMA, { prompt: 10_000_000, completion: 2 })
        // Billed what the request allows, well inside the hold; the claim past it disputed.
        expect(billed).toBeLessThan(Number(attempt.holdDiem))
        expect(record.burnDiem).toBe(formatMicros(billed))
        expect(record.costUsdc).toBe(formatMicros(charge(billed)))
        expect(record.disputedBurnDiem).toBe(formatMicros(claimed - billed))
        expect(record.usage).toMatchObject({ inputTokens: bound, outputTokens: 2, estimated: false })
        // The same dispute wherever disputed burn shows; the supplier earned what was charged.
        expect(moved.offer).toBe(claimed - billed)
        expect(moved.market).toBe(claimed - billed)
        expect(moved.metric).toBe(claimed - billed)
        expect(moved.earned).toBe(charge(billed))
        expect(await auditAll(stack.store, stack.keys)).toEqual([])
      })
    }
  }

  test('cache counts past the bounded prompt: the bound all at input, at the tier the bound reaches', async () => {
    usage = {
      prompt_tokens: 10_000_000,
      completion_tokens: 3,
      prompt_tokens_details: { cached_tokens: 9_000_000, cache_creation_input_tokens: 500_000 },
    }
    const moved = await disputedAcross(() =>
      served('/v1/chat/completions', {
        model: 'svc/glm-4.6',
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 20,
      }),
    )
    const { record, bound } = moved.result
    expect(bound).toBeLessThan(GLM_THRESHOLD)
    const billed = bill(GLM_BASE, { prompt: bound, completion: 3 })
    const claimed = bill(glmRates(10_000_000), {
      prompt: 10_000_000,
      cached: 9_000_000,
      written: 500_000,
      completion: 3,
    })
    expect(record.burnDiem).toBe(formatMicros(billed))
    expect(record.disputedBurnDiem).toBe(formatMicros(claimed - billed))
    expect(record.usage).toMatchObject({ inputTokens: bound, outputTokens: 3 })
    expect(moved.offer).toBe(claimed - billed)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })

  test('a prompt just past the bound, claimed at the cache price: never billed more than claimed', async () => {
    const sentBefore = received.length
    usage = { prompt_tokens: 0, completion_tokens: 1 }
    await served('/v1/chat/completions', {
      model: 'svc/glm-4.6',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 20,
    })
    const sent = received[sentBefore]!
    const prompt = promptTokenBound(sent.messages as ChatMessageLike[], sent) + 1
    usage = { prompt_tokens: prompt, completion_tokens: 1, prompt_tokens_details: { cached_tokens: prompt } }
    const { record, bound } = await served('/v1/chat/completions', {
      model: 'svc/glm-4.6',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 20,
    })
    const claimed = bill(GLM_BASE, { prompt, cached: prompt, completion: 1 })
    expect(claimed).toBeLessThan(bill(GLM_BASE, { prompt: bound, completion: 1 }))
    expect(record.burnDiem).toBe(formatMicros(claimed))
    expect(record.disputedBurnDiem).toBe('0.000000')
  })

  test('a prompt within the bound, cache split and all, is billed as reported', async () => {
    usage = { prompt_tokens: 6, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 5 } }
    const { record } = await served('/v1/chat/completions', {
      model: 'svc/glm-4.6',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 20,
    })
    expect(record.burnDiem).toBe(formatMicros(bill(GLM_BASE, { prompt: 6, cached: 5, completion: 4 })))
    expect(record.disputedBurnDiem).toBe('0.000000')
  })
})

describe('completion tokens past max_tokens x n are billed at that limit, the rest disputed', () => {
  test('chat, buffered, n: 2 at max_tokens 10: 50,000,000 claimed, 20 billed', async () => {
    usage = { prompt_tokens: 5, completion_tokens: 50_000_000 }
    const moved = await disputedAcross(() =>
      served('/v1/chat/completions', {
        model: 'llama-3.3-70b',
        messages: [{ role: 'user', content: 'hello' }],
        max_tokens: 10,
        n: 2,
      }),
    )
    const { record } = moved.result
    const billed = bill(LLAMA, { prompt: 5, completion: 20 })
    const claimed = bill(LLAMA, { prompt: 5, completion: 50_000_000 })
    expect(record.burnDiem).toBe(formatMicros(billed))
    expect(record.costUsdc).toBe(formatMicros(charge(billed)))
    expect(record.disputedBurnDiem).toBe(formatMicros(claimed - billed))
    expect(record.usage).toMatchObject({ inputTokens: 5, outputTokens: 20 })
    expect(moved.offer).toBe(claimed - billed)
    expect(moved.earned).toBe(charge(billed))
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })

  test('messages, streamed, max_tokens 10: 1,000 claimed, 10 billed', async () => {
    usage = { prompt_tokens: 5, completion_tokens: 1_000 }
    const { record } = await served('/v1/messages', {
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 10,
      stream: true,
    })
    const billed = bill(LLAMA, { prompt: 5, completion: 10 })
    expect(record.burnDiem).toBe(formatMicros(billed))
    expect(record.disputedBurnDiem).toBe(formatMicros(bill(LLAMA, { prompt: 5, completion: 1_000 }) - billed))
    expect(record.usage).toMatchObject({ inputTokens: 5, outputTokens: 10 })
  })

  test('a completion at the limit exactly is billed as reported', async () => {
    usage = { prompt_tokens: 5, completion_tokens: 10 }
    const { record } = await served('/v1/chat/completions', {
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 10,
      stream: true,
    })
    expect(record.burnDiem).toBe(formatMicros(bill(LLAMA, { prompt: 5, completion: 10 })))
    expect(record.disputedBurnDiem).toBe('0.000000')
  })
})

describe('chat shows the usage it billed, not the claim', () => {
  const chatBody = {
    model: 'svc/glm-4.6',
    messages: [{ role: 'user' as const, content: 'hello' }],
    max_tokens: 10,
  }
  const client = () => new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })

  /** The request's record once cleared, and its item in the account's activity. */
  async function recorded(ref: string) {
    let record = {} as RequestRecord
    await until(async () => {
      record = (await (
        await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${ref}`)
      ).json()) as RequestRecord
      return record.complete === true
    })
    const activity = (await (await keyFetch(stack, buyer.apiKey, '/v1/agent/activity?limit=50')).json()) as {
      data: { supportReference: string; inputTokens: number; outputTokens: number; costUsdc: string }[]
    }
    return { record, item: activity.data.find((i) => i.supportReference === ref) }
  }

  /** The bound of what the supplier was last sent. */
  const lastBound = () => {
    const sent = received.at(-1)!
    return promptTokenBound(sent.messages as ChatMessageLike[], sent)
  }

  /** The chat usage of billed counts, the cache split billed as such. */
  const shown = (prompt: number, completion: number, cached = 0) => ({
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached },
  })

  test('buffered: completion.usage, the cost header and the record all say the billed counts', async () => {
    usage = {
      prompt_tokens: 10_000_000,
      completion_tokens: 50_000_000,
      total_tokens: 60_000_000,
      prompt_tokens_details: { cached_tokens: 9_000_000, cache_creation_input_tokens: 500_000 },
      completion_tokens_details: { reasoning_tokens: 40_000_000 },
    }
    const { data, response } = await client().chat.completions.create(chatBody).withResponse()
    const bound = lastBound()
    const billed = bill(GLM_BASE, { prompt: bound, completion: 10 })
    expect(data.usage as unknown).toEqual({
      ...shown(bound, 10),
      prompt_tokens_details: { cached_tokens: 0, cache_creation_input_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 10 },
    })
    expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(charge(billed)))
    const { record, item } = await recorded(response.headers.get('x-svc-support-reference')!)
    expect(record.usage).toMatchObject({ inputTokens: bound, outputTokens: 10, estimated: false })
    expect(record.burnDiem).toBe(formatMicros(billed))
    expect(BigInt(parseMicros(record.disputedBurnDiem)!)).toBeGreaterThan(0n)
    expect(item).toMatchObject({ inputTokens: bound, outputTokens: 10, costUsdc: record.costUsdc })
  })

  test('buffered: a completion past its limit, the prompt and its cache split within their bound', async () => {
    usage = {
      prompt_tokens: 6,
      completion_tokens: 1_000,
      total_tokens: 1_006,
      prompt_tokens_details: { cached_tokens: 5 },
    }
    const { data, response } = await client().chat.completions.create(chatBody).withResponse()
    expect(data.usage).toEqual(shown(6, 10, 5))
    const billed = bill(GLM_BASE, { prompt: 6, cached: 5, completion: 10 })
    expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(charge(billed)))
  })

  test("streamed: the final chunk's usage and the svc.cost frame say the billed counts", async () => {
    usage = {
      prompt_tokens: 10_000_000,
      completion_tokens: 2_000,
      total_tokens: 10_002_000,
      prompt_tokens_details: { cached_tokens: 9_000_000 },
      cache_creation_input_tokens: 500_000,
    }
    const stream = await client().chat.completions.create({
      ...chatBody,
      stream: true,
      stream_options: { include_usage: true },
    })
    const chunks: Record<string, unknown>[] = []
    for await (const chunk of stream) chunks.push(chunk as unknown as Record<string, unknown>)
    const bound = lastBound()
    const billed = bill(GLM_BASE, { prompt: bound, completion: 10 })
    const final = chunks.filter((c) => c.usage).at(-1)!
    expect(final.usage).toEqual({ ...shown(bound, 10), cache_creation_input_tokens: 0 })
    const cost = chunks.find((c) => c.object === 'svc.cost') as { costUsdc: string; supportReference: string }
    expect(cost.costUsdc).toBe(formatMicros(charge(billed)))
    const { record, item } = await recorded(cost.supportReference)
    expect(record.usage).toMatchObject({ inputTokens: bound, outputTokens: 10, estimated: false })
    expect(BigInt(parseMicros(record.disputedBurnDiem)!)).toBeGreaterThan(0n)
    expect(item).toMatchObject({ inputTokens: bound, outputTokens: 10 })
  })

  test('buffered, a report without its completion count: the usage shown is the estimate billed', async () => {
    usage = { prompt_tokens: 10_000_000 }
    const { data, response } = await client().chat.completions.create(chatBody).withResponse()
    const { record } = await recorded(response.headers.get('x-svc-support-reference')!)
    expect(record.usage).toMatchObject({ inputTokens: lastBound(), estimated: true })
    const { inputTokens, outputTokens } = record.usage
    expect(data.usage as unknown).toEqual(shown(inputTokens, outputTokens))
  })

  test('a prompt past its bound but nearly all cache reads, cheaper than the bound: the report, shown and billed', async () => {
    // One token past the bound of what the supplier is sent, all but one of them cache reads.
    const prompt = promptTokenBound(chatBody.messages, chatBody) + 1
    const report = {
      prompt_tokens: prompt,
      completion_tokens: 4,
      total_tokens: prompt + 4,
      prompt_tokens_details: { cached_tokens: prompt - 1 },
    }
    usage = report
    const { data, response } = await client().chat.completions.create(chatBody).withResponse()
    const bound = lastBound()
    expect(prompt).toBeGreaterThan(bound)
    const claimed = bill(GLM_BASE, { prompt, cached: prompt - 1, completion: 4 })
    expect(claimed).toBeLessThan(bill(GLM_BASE, { prompt: bound, completion: 4 }))
    expect(data.usage as unknown).toEqual(report)
    expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(charge(claimed)))
    const { record, item } = await recorded(response.headers.get('x-svc-support-reference')!)
    expect(record.burnDiem).toBe(formatMicros(claimed))
    expect(record.costUsdc).toBe(formatMicros(charge(claimed)))
    expect(record.disputedBurnDiem).toBe('0.000000')
    expect(record.usage).toMatchObject({ inputTokens: prompt, outputTokens: 4, estimated: false })
    expect(item).toMatchObject({ inputTokens: prompt, outputTokens: 4 })
    const stream = await client().chat.completions.create({
      ...chatBody,
      stream: true,
      stream_options: { include_usage: true },
    })
    let last: unknown = null
    for await (const chunk of stream) if (chunk.usage) last = chunk.usage
    expect(last).toEqual(report)
    const responses = await client().responses.create({
      model: chatBody.model,
      input: 'hello',
      max_output_tokens: 10,
    })
    expect(lastBound()).toBe(bound)
    expect(responses.usage).toMatchObject({
      input_tokens: prompt,
      input_tokens_details: { cached_tokens: prompt - 1 },
      output_tokens: 4,
      total_tokens: prompt + 4,
    })
  })

  test('a report within the bounds reaches the buyer as the supplier wrote it', async () => {
    usage = {
      prompt_tokens: 6,
      completion_tokens: 4,
      total_tokens: 10,
      prompt_tokens_details: { cached_tokens: 5, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 3 },
      supplier_field: 'kept',
    }
    const buffered = await client().chat.completions.create(chatBody)
    expect(buffered.usage as unknown).toEqual(usage)
    const stream = await client().chat.completions.create({
      ...chatBody,
      stream: true,
      stream_options: { include_usage: true },
    })
    let last: unknown = null
    for await (const chunk of stream) if (chunk.usage) last = chunk.usage
    expect(last).toEqual(usage)
  })
})

test("an estimate capped at the upstream key's balance is not a dispute", async () => {
  // A cheaper offer whose key had one micro-DIEM before the call: its stream ends without usage.
  const poor = await postOffer(stack, `http://127.0.0.1:${supplier.port}`, ASK - 10, {
    upstreamKey: POOR_KEY,
  })
  usage = null
  try {
    const { record } = await served('/v1/chat/completions', {
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 20,
      stream: true,
    })
    expect(record.usage.estimated).toBe(true)
    expect(record.burnDiem).toBe('0.000001')
    expect(record.disputedBurnDiem).toBe('0.000000')
  } finally {
    await adminFetch(stack, `/admin/v1/offers/${poor.id}`, { method: 'DELETE' })
  }
})
