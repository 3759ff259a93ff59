// The Responses and Messages facades given what a supplier may send that chat relays as it is: a
// tool call that is null. Each route answers and charges the same as chat does, buffered and
// streamed, and a stream never leaves its hold behind. And streams of every shape: a streamed
// refusal is shown (on Messages it stops as one) as the buffered answer shows it; a tool call cut
// mid-stream is billed on what was generated; a tool's arguments that are no JSON object reach the
// Anthropic SDK as a buffered answer gives them; parallel calls without an index stay apart. A value
// of odd input whose type is no string is a 400 naming it, never a 500.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer } from '../helpers/buyers.ts'
import {
  type HostileAnswer,
  type HostileSupplier,
  hostileSupplier,
  sseAnswer,
  wholeAnswer,
} from '../helpers/hostile-supplier.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let hostile: HostileSupplier
let buyer: TestAccount
let answer: () => HostileAnswer

beforeAll(async () => {
  hostile = hostileSupplier(() => answer())
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: { upstreamBaseUrl: hostile.url, upstreamApiKey: 'hostile-key', askCents: 50, capacityDiem: '50' },
  })
  expect(offer.status).toBe(201)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  hostile.stop()
})

// Within the prompt's bound, so billed as reported.
const USAGE = { prompt_tokens: 5, completion_tokens: 50, total_tokens: 55 }
const ROUTES = {
  chat: ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 64 }],
  responses: ['/v1/responses', { input: 'hi', max_output_tokens: 64 }],
  messages: ['/v1/messages', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 64 }],
} as const

async function paid(path: string, body: Record<string, unknown>) {
  const before = await balances(stack, buyer.accountId)
  const response = await keyFetch(stack, buyer.apiKey, path, {
    method: 'POST',
    json: { model: 'llama-3.3-70b', ...body },
  })
  const text = await response.text()
  await until(async () => (await balances(stack, buyer.accountId)).held === 0)
  return { response, text, charged: before.confirmed - (await balances(stack, buyer.accountId)).confirmed }
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}`
const usageChunk = (usage: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [], usage })}`

describe('a null tool call', () => {
  for (const [route, [path, body]] of Object.entries(ROUTES)) {
    test(`${route}, buffered: answered 200 and charged the usage, as chat is`, async () => {
      answer = () =>
        wholeAnswer(
          200,
          JSON.stringify({
            id: 'chatcmpl-h',
            object: 'chat.completion',
            choices: [
              {
                index: 0,
                message: { role: 'assistant', content: 'hi', tool_calls: [null] },
                finish_reason: 'stop',
              },
            ],
            usage: USAGE,
          }),
        )
      const { response, charged } = await paid(path, body)
      expect(response.status).toBe(200)
      expect(charged).toBe(expectedCost(USAGE, 50))
      expect(response.headers.get('x-svc-cost-usdc')).toBe((charged / 1e6).toFixed(6))
    })

    test(`${route}, streamed: relayed to its end and charged the usage, nothing left held`, async () => {
      answer = () =>
        sseAnswer([
          chunk({ content: 'hello there' }),
          chunk({ tool_calls: [null] }),
          chunk({}, 'stop'),
          `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [], usage: USAGE })}`,
          'data: [DONE]',
        ])
      const { response, text, charged } = await paid(path, { ...body, stream: true })
      expect(response.status).toBe(200)
      expect(text).toContain('hello there')
      expect(charged).toBe(expectedCost(USAGE, 50))
    })
  }
})

describe('usage as Responses reports it', () => {
  const answerWith = (usage: Record<string, unknown>) => () =>
    wholeAnswer(
      200,
      JSON.stringify({
        id: 'chatcmpl-h',
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage,
      }),
    )
  const cachedReported = async () => {
    const { response, text } = await paid('/v1/responses', {
      model: 'glm-4.6',
      input: 'hi',
      max_output_tokens: 64,
    })
    expect(response.status).toBe(200)
    return (JSON.parse(text) as { usage: { input_tokens_details: { cached_tokens: number } } }).usage
      .input_tokens_details.cached_tokens
  }

  test('cached_tokens is the cache reads billed as such, not the supplier count the meter could not take', async () => {
    answer = answerWith({
      prompt_tokens: 5,
      completion_tokens: 10,
      total_tokens: 15,
      prompt_tokens_details: { cached_tokens: 3 },
    })
    expect(await cachedReported()).toBe(3)
    // More read and written than the prompt holds: the whole prompt billed at input, none as read.
    answer = answerWith({
      prompt_tokens: 5,
      completion_tokens: 10,
      total_tokens: 15,
      prompt_tokens_details: { cached_tokens: 4, cache_creation_input_tokens: 3 },
    })
    expect(await cachedReported()).toBe(0)
  })
})

describe('a stream cut before any usage is estimated on all its prompt', () => {
  // 4,000 words of tool description: prompt text the upstream reads and bills (at least a token each).
  const description = Array.from({ length: 4_000 }, (_, i) => `word${i}`).join(' ')
  const parameters = { type: 'object', properties: {} }
  const withTools = {
    chat: { tools: [{ type: 'function', function: { name: 'lookup', description, parameters } }] },
    responses: { tools: [{ type: 'function', name: 'lookup', description, parameters }] },
    messages: { tools: [{ name: 'lookup', description, input_schema: parameters }] },
  }
  const cut = () =>
    sseAnswer([
      `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'hello' }, finish_reason: null }] })}`,
      `data: ${JSON.stringify({ error: { message: 'gone', code: 'boom' } })}`,
    ])

  for (const [route, [path, body]] of Object.entries(ROUTES)) {
    test(`${route}: the tools sent count as prompt`, async () => {
      answer = cut
      const plain = await paid(path, { ...body, stream: true })
      const tooled = await paid(path, {
        ...body,
        ...withTools[route as keyof typeof withTools],
        stream: true,
      })
      expect(plain.charged).toBeGreaterThan(0)
      // At least 4,000 tokens more at 0.70 per million, at an ask of 50.
      expect(tooled.charged - plain.charged).toBeGreaterThanOrEqual(Math.floor(4_000 * 0.7 * 0.5))
    })
  }
})

describe('a block type that is no string: a 400, not a 500', () => {
  const odd = { toString: 1 }
  const ask = { messages: [{ role: 'user', content: 'hi' }] }
  const cases: [string, Record<string, unknown>][] = [
    ['/v1/messages', { ...ask, messages: [{ role: 'user', content: [{ type: odd }] }] }],
    ['/v1/messages', { ...ask, system: [{ type: odd }] }],
    ['/v1/messages', { ...ask, tools: [{ type: odd, name: 'f', input_schema: {} }] }],
    ['/v1/messages', { ...ask, thinking: { type: odd } }],
    ['/v1/messages', { ...ask, service_tier: odd }],
    ['/v1/messages/count_tokens', { ...ask, messages: [{ role: 'user', content: [{ type: [odd] }] }] }],
  ]
  const responses: Record<string, unknown>[] = [
    { input: [{ role: 'user', content: [{ type: odd }] }] },
    { input: [{ type: odd }] },
    { input: 'hi', tools: [{ type: odd }] },
    { input: 'hi', text: { format: { type: odd } } },
    { input: 'hi', service_tier: odd },
    { input: 'hi', include: [odd] },
  ]
  for (const body of responses) {
    test(`/v1/responses ${JSON.stringify(body).slice(0, 90)}`, async () => {
      const before = await snapshotKeys(stack.store, stack.keys.prefix)
      const response = await keyFetch(stack, buyer.apiKey, '/v1/responses', {
        method: 'POST',
        json: { model: 'llama-3.3-70b', ...body },
      })
      expect(response.status).toBe(400)
      expect(((await response.json()) as { error: { message: string } }).error.message).toContain('toString')
      const after = await snapshotKeys(stack.store, stack.keys.prefix)
      for (const key of Object.keys(after)) if (key.includes(':apikey:')) delete after[key]
      for (const key of Object.keys(before)) if (key.includes(':apikey:')) delete before[key]
      expect(after).toEqual(before)
    })
  }
  for (const [path, body] of cases) {
    test(`${path} ${JSON.stringify(body).slice(0, 90)}`, async () => {
      const before = await snapshotKeys(stack.store, stack.keys.prefix)
      const response = await keyFetch(stack, buyer.apiKey, path, {
        method: 'POST',
        json: { model: 'llama-3.3-70b', max_tokens: 64, ...body },
      })
      expect(response.status).toBe(400)
      expect(await response.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } })
      const after = await snapshotKeys(stack.store, stack.keys.prefix)
      for (const key of Object.keys(after)) if (key.includes(':apikey:')) delete after[key]
      for (const key of Object.keys(before)) if (key.includes(':apikey:')) delete before[key]
      expect(after).toEqual(before)
    })
  }
})

test('a streamed refusal is shown and stops as refusal, as the buffered one does', async () => {
  const USAGE = { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 }
  answer = () =>
    sseAnswer([
      chunk({ role: 'assistant', content: '' }),
      chunk({ refusal: "I'm sorry, I can't help with that." }),
      chunk({}, 'stop'),
      usageChunk(USAGE),
      'data: [DONE]',
    ])
  const client = new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
  const before = await balances(stack, buyer.accountId)
  const final = await client.messages
    .stream({ model: 'llama-3.3-70b', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] })
    .finalMessage()
  await until(async () => (await balances(stack, buyer.accountId)).held === 0)
  const charged = before.confirmed - (await balances(stack, buyer.accountId)).confirmed
  expect(charged).toBe(expectedCost(USAGE, 50))
  // Charged for six tokens of refusal: the client must see them.
  expect(final.content as unknown[]).toEqual([
    { type: 'text', text: "I'm sorry, I can't help with that.", citations: null },
  ])
  expect(final.stop_reason).toBe('refusal')
})

test('a streamed refusal on /v1/responses is its message, as the buffered one is (openai SDK)', async () => {
  const USAGE = { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 }
  const refusal = "I'm sorry, I can't help with that."
  answer = () =>
    sseAnswer([
      chunk({ role: 'assistant', content: '' }),
      chunk({ refusal: refusal.slice(0, 10) }),
      chunk({ refusal: refusal.slice(10) }),
      chunk({}, 'stop'),
      usageChunk(USAGE),
      'data: [DONE]',
    ])
  const client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
  const before = await balances(stack, buyer.accountId)
  const deltas: string[] = []
  const stream = client.responses.stream({ model: 'llama-3.3-70b', input: 'hi' })
  stream.on('response.refusal.delta', (event) => deltas.push(event.delta))
  const final = await stream.finalResponse()
  await until(async () => (await balances(stack, buyer.accountId)).held === 0)
  expect(before.confirmed - (await balances(stack, buyer.accountId)).confirmed).toBe(expectedCost(USAGE, 50))
  expect(deltas.join('')).toBe(refusal)
  expect(final.output).toMatchObject([
    { type: 'message', role: 'assistant', content: [{ type: 'refusal', refusal }] },
  ])
})

test('a tool call cut mid-stream is billed on the arguments generated, not on the chunks around them', async () => {
  // 40 argument pieces of one short word each: about 40 tokens generated, then the supplier breaks.
  const pieces = ['{"q":"', ...Array.from({ length: 38 }, () => 'ab '), 'x"}']
  const cut = (tool: boolean) =>
    sseAnswer([
      chunk({ role: 'assistant', content: '' }),
      ...(tool
        ? [
            chunk({
              tool_calls: [
                { index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } },
              ],
            }),
            ...pieces.map((p) => chunk({ tool_calls: [{ index: 0, function: { arguments: p } }] })),
          ]
        : pieces.map((p) => chunk({ content: p }))),
      `data: ${JSON.stringify({ error: { message: 'gone', code: 'boom' } })}`,
    ])
  const tools = [{ name: 'f', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }]
  const record = async (text: string) => {
    const ref = /"supportReference":"(sr_[^"]+)"/.exec(text)![1]!
    const r = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${ref}`)
    return ((await r.json()) as { usage: { outputTokens: number; estimated: boolean } }).usage
  }
  answer = () => cut(false)
  const asText = await paid('/v1/messages', {
    messages: [{ role: 'user', content: 'hi' }],
    tools,
    max_tokens: 4000,
    stream: true,
  })
  answer = () => cut(true)
  const asTool = await paid('/v1/messages', {
    messages: [{ role: 'user', content: 'hi' }],
    tools,
    max_tokens: 4000,
    stream: true,
  })
  const text = await record(asText.text)
  const tool = await record(asTool.text)
  expect(text.estimated).toBe(true)
  expect(tool.estimated).toBe(true)
  // The same characters generated (plus the tool's name and id): near the same output tokens.
  expect(tool.outputTokens).toBeLessThan(text.outputTokens + 10)
})

test('a streamed tool call whose arguments are no JSON object: the SDK gets what a buffered answer gives', async () => {
  const USAGE = { prompt_tokens: 5, completion_tokens: 6, total_tokens: 11 }
  answer = () =>
    sseAnswer([
      chunk({ role: 'assistant', content: '' }),
      chunk({
        tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }],
      }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "{'q': 'x'}" } }] }),
      chunk({}, 'tool_calls'),
      usageChunk(USAGE),
      'data: [DONE]',
    ])
  const client = new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
  const tools = [{ name: 'f', input_schema: { type: 'object' as const } }]
  const final = await client.messages
    .stream({ model: 'llama-3.3-70b', max_tokens: 64, tools, messages: [{ role: 'user', content: 'hi' }] })
    .finalMessage()
    .catch((e) => e)
  expect(final).not.toBeInstanceOf(Error)
  expect(final.content[0]).toMatchObject({ type: 'tool_use', input: { arguments: "{'q': 'x'}" } })
})

test('parallel tool calls streamed without an index (each whole in its chunk, its own id): two tool_use blocks', async () => {
  const USAGE = { prompt_tokens: 5, completion_tokens: 16, total_tokens: 21 }
  const whole = (id: string, name: string, args: string) =>
    chunk({ tool_calls: [{ id, type: 'function', function: { name, arguments: args } }] })
  answer = () =>
    sseAnswer([
      chunk({ role: 'assistant', content: '' }),
      whole('call_a', 'get_weather', '{"city":"Paris"}'),
      whole('call_b', 'get_time', '{"tz":"CET"}'),
      chunk({}, 'tool_calls'),
      usageChunk(USAGE),
      'data: [DONE]',
    ])
  const client = new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
  const tools = [
    { name: 'get_weather', input_schema: { type: 'object' as const } },
    { name: 'get_time', input_schema: { type: 'object' as const } },
  ]
  const params = {
    model: 'llama-3.3-70b',
    max_tokens: 64,
    tools,
    messages: [{ role: 'user' as const, content: 'hi' }],
  }
  const final = await client.messages.stream(params).finalMessage()
  expect(final.content as unknown[]).toEqual([
    { type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Paris' } },
    { type: 'tool_use', id: 'call_b', name: 'get_time', input: { tz: 'CET' } },
  ])
})
