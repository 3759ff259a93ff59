// Anthropic's own client (@anthropic-ai/sdk) against POST /v1/messages: messages.create, the
// messages.stream helper, a tool-use round trip, countTokens and its error classes; every answer's
// cost equal to what the account was charged, and nothing left held.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { formatMicros, parseMicros } from '../../src/money/units.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, type SimOffer, simKey, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let client: Anthropic
let offer: SimOffer

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 9 } })
  offer = await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
  client = new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
})
afterAll(() => stack.stop())

const charged = async (run: () => Promise<unknown>) => {
  const before = await balances(stack, buyer.accountId)
  await run()
  const after = await balances(stack, buyer.accountId)
  expect(after.held).toBe(0)
  return before.confirmed - after.confirmed
}

const weather: Anthropic.Tool = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}

describe('messages.create', () => {
  test('a text answer with usage, end_turn and the cost headers, charged exactly that', async () => {
    let message: Anthropic.Message | undefined
    let headers: Headers | undefined
    const cost = await charged(async () => {
      // Sampling fields this SDK version no longer types are still Anthropic's API, and honoured.
      const params = {
        model: 'svc/llama-3.3-70b',
        max_tokens: 100,
        system: [{ type: 'text' as const, text: 'Be brief.' }],
        messages: [{ role: 'user' as const, content: 'Tell me about markets.' }],
        temperature: 0.5,
        top_k: 40,
        stop_sequences: ['###'],
        metadata: { user_id: 'agent-1' },
      }
      const { data, response } = await client.messages.create(params).withResponse()
      message = data
      headers = response.headers
    })
    expect(message!.type).toBe('message')
    expect(message!.role).toBe('assistant')
    expect(message!.id).toStartWith('msg_')
    expect(message!.stop_reason).toBe('end_turn')
    expect(message!.content).toHaveLength(1)
    const block = message!.content[0] as Anthropic.TextBlock
    expect(block.type).toBe('text')
    expect(block.text.split(' ')).toHaveLength(9)
    expect(message!.usage.output_tokens).toBe(9)
    const expected = expectedCost({ prompt_tokens: message!.usage.input_tokens, completion_tokens: 9 }, 40)
    expect(cost).toBe(expected)
    expect(headers!.get('x-svc-cost-usdc')).toBe(formatMicros(expected))
    expect(headers!.get('x-svc-clearing-price-cents')).toBe('40')
    expect(headers!.get('x-svc-support-reference')).toMatch(/^sr_/)
  })

  test('cut at max_tokens: stop_reason max_tokens', async () => {
    const message = await client.messages.create({
      model: 'llama-3.3-70b',
      max_tokens: 3,
      messages: [{ role: 'user', content: 'hi' }],
    })
    expect(message.stop_reason).toBe('max_tokens')
    expect(message.usage.output_tokens).toBe(3)
  })

  test('a stop sequence the supplier names: stop_reason stop_sequence, buffered and streamed', async () => {
    const params = {
      model: 'llama-3.3-70b',
      max_tokens: 100,
      stop_sequences: ['###', 'cheapest'],
      messages: [{ role: 'user' as const, content: 'hi' }],
    }
    const message = await client.messages.create(params)
    expect(message).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: 'cheapest' })
    expect((message.content[0] as Anthropic.TextBlock).text).toBe('the market clears at the')
    const streamed = await client.messages.stream(params).finalMessage()
    expect(streamed).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: 'cheapest' })
    expect((streamed.content[0] as Anthropic.TextBlock).text).toBe('the market clears at the')
  })

  test('thinking on a reasoning model comes back as a thinking block before the text', async () => {
    const message = await client.messages.create({
      model: 'qwen3-4b',
      max_tokens: 2000,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [{ role: 'user', content: 'Think.' }],
    })
    expect(message.content.map((b) => b.type)).toEqual(['thinking', 'text'])
    expect((message.content[0] as Anthropic.ThinkingBlock).thinking.length).toBeGreaterThan(0)
  })
})

describe('messages.stream', () => {
  test('the stream helper: text as it comes, a final message, and the cost on message_delta', async () => {
    let deltas = ''
    let final: Anthropic.Message | undefined
    let costUsdc: string | undefined
    const cost = await charged(async () => {
      const stream = client.messages.stream({
        model: 'llama-3.3-70b',
        max_tokens: 100,
        messages: [{ role: 'user', content: 'Tell me about markets.' }],
      })
      stream.on('text', (text) => {
        deltas += text
      })
      stream.on('streamEvent', (event) => {
        if (event.type === 'message_delta') costUsdc = (event as unknown as { costUsdc: string }).costUsdc
      })
      final = await stream.finalMessage()
    })
    expect(final!.stop_reason).toBe('end_turn')
    const text = (final!.content[0] as Anthropic.TextBlock).text
    expect(text).toBe(deltas)
    expect(text.split(' ')).toHaveLength(9)
    expect(final!.usage.output_tokens).toBe(9)
    expect(final!.usage.input_tokens).toBeGreaterThan(0)
    expect(cost).toBe(expectedCost({ prompt_tokens: final!.usage.input_tokens, completion_tokens: 9 }, 40))
    expect(parseMicros(costUsdc!)).toBe(cost)
  })

  test("a stream the supplier cut: the helper rejects with the error event's APIError, its estimate charged", async () => {
    await simKey(stack, offer.upstreamKey, { fault: 'truncate', times: 1 })
    let error: unknown
    const cost = await charged(async () => {
      const stream = client.messages.stream({
        model: 'llama-3.3-70b',
        max_tokens: 100,
        messages: [{ role: 'user', content: 'Tell me about markets.' }],
      })
      error = await stream.finalMessage().catch((e) => e)
    })
    expect(error).toBeInstanceOf(Anthropic.APIError)
    const body = (error as { error: { error: { type: string; code: string; costUsdc: string } } }).error
    expect(body.error).toMatchObject({ type: 'api_error', code: 'stream_incomplete' })
    expect(parseMicros(body.error.costUsdc)).toBe(cost)
  })
})

describe('tool use', () => {
  test('a round trip: tool_use with parsed input, then the tool_result answered with text', async () => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }]
    const first = await client.messages.create({
      model: 'llama-3.3-70b',
      max_tokens: 200,
      tools: [weather],
      messages,
    })
    expect(first.stop_reason).toBe('tool_use')
    const call = first.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock
    expect(call.name).toBe('get_weather')
    expect(call.input).toEqual({ city: 'market' })
    messages.push(
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] },
    )
    const second = await client.messages.create({
      model: 'llama-3.3-70b',
      max_tokens: 200,
      tools: [weather],
      messages,
    })
    expect(second.stop_reason).toBe('end_turn')
    expect((second.content[0] as Anthropic.TextBlock).text.split(' ')).toHaveLength(9)
  })

  test('streamed: input_json_delta pieces make the parsed input of the final message', async () => {
    const stream = client.messages.stream({
      model: 'llama-3.3-70b',
      max_tokens: 200,
      tools: [weather],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [{ role: 'user', content: 'Weather?' }],
    })
    const final = await stream.finalMessage()
    expect(final.stop_reason).toBe('tool_use')
    expect(final.content).toHaveLength(1)
    expect(final.content[0]).toMatchObject({
      type: 'tool_use',
      name: 'get_weather',
      input: { city: 'market' },
    })
  })
})

test('countTokens: a count by the tokenizer, and nothing in Redis changed', async () => {
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const counted = await client.messages.countTokens({
    model: 'llama-3.3-70b',
    system: 'Be brief.',
    messages: [{ role: 'user', content: 'Tell me about markets.' }],
  })
  expect(counted.input_tokens).toBeGreaterThan(5)
  expect(counted.input_tokens).toBeLessThan(40)
  const withTools = await client.messages.countTokens({
    model: 'llama-3.3-70b',
    system: 'Be brief.',
    tools: [weather],
    messages: [{ role: 'user', content: 'Tell me about markets.' }],
  })
  expect(withTools.input_tokens).toBeGreaterThan(counted.input_tokens)
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
})

describe('errors: the SDK classes, Anthropic shape', () => {
  const ask = { model: 'llama-3.3-70b', max_tokens: 10, messages: [{ role: 'user' as const, content: 'hi' }] }

  test('401: AuthenticationError', async () => {
    const stranger = new Anthropic({ apiKey: `svc_${'0'.repeat(48)}`, baseURL: stack.url, maxRetries: 0 })
    const error = await stranger.messages.create(ask).catch((e) => e)
    expect(error).toBeInstanceOf(Anthropic.AuthenticationError)
    expect(error.error).toMatchObject({ type: 'error', error: { type: 'authentication_error' } })
  })

  test('402: insufficient balance, billing_error', async () => {
    const poor = await fundedBuyer(stack, '0.000001')
    const broke = new Anthropic({ apiKey: poor.apiKey, baseURL: stack.url, maxRetries: 0 })
    const error = await broke.messages.create(ask).catch((e) => e)
    expect(error).toBeInstanceOf(Anthropic.APIError)
    expect(error.status).toBe(402)
    expect(error.error).toMatchObject({ type: 'error', error: { type: 'billing_error' } })
  })

  test('400: BadRequestError naming the field that cannot be honoured', async () => {
    const error = await client.messages
      .create({ ...ask, container: 'c1' } as Anthropic.MessageCreateParamsNonStreaming)
      .catch((e) => e)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    expect(error.error.error.type).toBe('invalid_request_error')
    expect(error.error.error.message).toContain('container')
  })

  test('400: thinking asked of a model without reasoning', async () => {
    const error = await client.messages
      .create({ ...ask, max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 1024 } })
      .catch((e) => e)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    expect(error.error.error.message).toContain('thinking')
  })
})

describe("Anthropic's request-id", () => {
  test('every answer carries the request-id header the SDK reads: the message, the stream, a count', async () => {
    const { data, response, request_id } = await client.messages
      .create({ model: 'llama-3.3-70b', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
      .withResponse()
    expect(request_id).toMatch(/^req_/)
    expect(request_id).toBe(response.headers.get('x-svc-request-id'))
    expect((data as { _request_id?: string | null })._request_id).toBe(request_id)
    const stream = client.messages.stream({
      model: 'llama-3.3-70b',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'hi' }],
    })
    await stream.finalMessage()
    expect(stream.request_id).toMatch(/^req_/)
    const counted = await client.messages.countTokens({
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hi' }],
    })
    expect(counted._request_id).toMatch(/^req_/)
  })

  test("a refusal: APIError.requestID, and the body's request_id beside its error", async () => {
    const error = await client.messages
      .create({ model: 'no-such-model', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e) => e)
    expect(error).toBeInstanceOf(Anthropic.NotFoundError)
    expect(error.requestID).toMatch(/^req_/)
    expect(error.error).toMatchObject({ type: 'error', request_id: error.requestID })
  })
})

test('a body over the limit: 413 request_too_large, before the key is read, nothing in Redis changed', async () => {
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const error = await client.messages
    .create({
      model: 'llama-3.3-70b',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'x'.repeat(9_000_000) }],
    })
    .catch((e) => e)
  expect(error).toBeInstanceOf(Anthropic.APIError)
  expect(error.status).toBe(413)
  expect(error.error).toMatchObject({
    type: 'error',
    error: { type: 'request_too_large', code: 'body_too_large' },
  })
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
})

test('countTokens refuses by name a field /v1/messages refuses: never a count of a prompt that would not be sent', async () => {
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const error = await client.messages
    .countTokens({
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hi' }],
      mcp_servers: [{ type: 'url', url: 'https://mcp.example.com', name: 'docs' }],
    } as Anthropic.MessageCountTokensParams)
    .catch((e) => e)
  expect(error).toBeInstanceOf(Anthropic.BadRequestError)
  expect(error.error.error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter' })
  expect(error.error.error.message).toContain('mcp_servers')
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
})
