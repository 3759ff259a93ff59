// The Messages and Responses facades against a supplier's streams of every shape, and refusals of
// odd input: a value whose type is no string is a 400 naming it (never a 500); a streamed refusal
// is shown (and on Messages stops as one) as the buffered answer shows it; a tool call cut
// mid-stream is billed on what was generated; a tool's arguments that are no JSON object reach the
// SDK as a buffered answer gives them; parallel calls without an index stay apart.
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

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}`
const usageChunk = (usage: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [], usage })}`

async function paid(body: Record<string, unknown>, path = '/v1/messages') {
  const before = await balances(stack, buyer.accountId)
  const response = await keyFetch(stack, buyer.apiKey, path, {
    method: 'POST',
    json: { model: 'llama-3.3-70b', max_tokens: 64, ...body },
  })
  const text = await response.text()
  await until(async () => (await balances(stack, buyer.accountId)).held === 0)
  return { response, text, charged: before.confirmed - (await balances(stack, buyer.accountId)).confirmed }
}

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
  const asText = await paid({
    messages: [{ role: 'user', content: 'hi' }],
    tools,
    max_tokens: 4000,
    stream: true,
  })
  answer = () => cut(true)
  const asTool = await paid({
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
