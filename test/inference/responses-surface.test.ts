// The whole Responses surface over the wire: tools and function-call items both ways, structured
// output, reasoning, the limit, and a 400 naming every field that cannot be honoured; buffered and
// streamed, against the simulated supplier, with OpenAI's event sequence.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, type SimOffer, simKey, simOffer } from '../helpers/buyers.ts'
import { moneyAndMarketKeys, snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let offer: SimOffer

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 6 } })
  offer = await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(() => stack.stop())

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  },
  strict: true,
}

function post(body: Record<string, unknown>) {
  return fetch(`${stack.url}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama-3.3-70b', input: 'hello', ...body }),
  })
}

// biome-ignore lint/suspicious/noExplicitAny: the tests read OpenAI's JSON by path
type Json = Record<string, any>

async function buffered(body: Record<string, unknown>): Promise<Json> {
  const response = await post(body)
  expect(response.status).toBe(200)
  return (await response.json()) as Json
}

async function streamed(body: Record<string, unknown>): Promise<Json[]> {
  const text = await (await post({ ...body, stream: true })).text()
  const events = text
    .split('\n\n')
    .filter((frame) => frame.includes('data: '))
    .map((frame) => {
      const lines = frame.split('\n')
      const data = JSON.parse(lines.find((l) => l.startsWith('data: '))!.slice(6)) as Json
      expect(lines.find((l) => l.startsWith('event: '))).toBe(`event: ${data.type}`)
      return data
    })
  expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i))
  return events
}

describe('function tools', () => {
  test('buffered: a function_call output item; tools, tool_choice and metadata are echoed', async () => {
    const response = await buffered({
      tools: [weatherTool],
      tool_choice: 'required',
      parallel_tool_calls: false,
      user: 'agent-7',
      metadata: { run: 'r1' },
    })
    expect(response.status).toBe('completed')
    expect(response.output).toEqual([
      {
        id: expect.stringMatching(/^fc_/),
        type: 'function_call',
        status: 'completed',
        call_id: expect.stringMatching(/^call_/),
        name: 'get_weather',
        arguments: '{"city":"market"}',
      },
    ])
    expect(response.tools).toEqual([weatherTool])
    expect(response.tool_choice).toBe('required')
    expect(response.parallel_tool_calls).toBe(false)
    expect(response.user).toBe('agent-7')
    expect(response.metadata).toEqual({ run: 'r1' })
  })

  test("streamed: OpenAI's function-call event sequence, arguments in several deltas", async () => {
    const events = await streamed({ tools: [weatherTool] })
    const types = events.map((e) => e.type)
    const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta')
    expect(deltas.length).toBeGreaterThan(1)
    expect(types).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      ...deltas.map(() => 'response.function_call_arguments.delta'),
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ])
    expect(events[2]!.item).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: '' })
    const done = events.at(-3)!
    expect(done.arguments).toBe(deltas.map((d) => d.delta).join(''))
    expect(JSON.parse(done.arguments)).toEqual({ city: 'market' })
    const completed = events.at(-1)!
    expect(completed.response.output[0]).toMatchObject({ type: 'function_call', status: 'completed' })
    expect(completed.response.usage.output_tokens).toBe(deltas.length)
    expect(completed.costUsdc).toMatch(/^\d+\.\d{6}$/)
  })

  test('function_call and function_call_output items go back to the supplier as chat turns', async () => {
    const input = [
      { role: 'user', content: 'weather in Paris?' },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
    ]
    // The sim answers in words once the last turn is a tool's result: the items arrived as chat turns.
    const response = await buffered({ input, tools: [weatherTool] })
    expect(response.output).toHaveLength(1)
    expect(response.output[0]).toMatchObject({ type: 'message', status: 'completed' })
    expect(response.output[0].content[0].text.split(' ')).toHaveLength(6)
  })
})

test('a stream cut inside a function call: the call closes incomplete, response.incomplete with cost', async () => {
  await simKey(stack, offer.upstreamKey, { fault: 'truncate', times: 1 })
  const events = await streamed({ tools: [weatherTool] })
  const types = events.map((e) => e.type)
  expect(types.slice(-3)).toEqual([
    'response.function_call_arguments.done',
    'response.output_item.done',
    'response.incomplete',
  ])
  expect(events.at(-2)!.item).toMatchObject({ type: 'function_call', status: 'incomplete' })
  const last = events.at(-1)!
  expect(last.response.incomplete_details).toEqual({ reason: 'stream_incomplete' })
  expect(last.costUsdc).toMatch(/^\d+\.\d{6}$/)
})

describe('structured output and reasoning', () => {
  const format = {
    type: 'json_schema',
    name: 'city',
    strict: true,
    schema: {
      type: 'object',
      properties: { name: { type: 'string' }, population: { type: 'integer' } },
      required: ['name', 'population'],
      additionalProperties: false,
    },
  }

  test('text.format json_schema: output text that fits the schema, buffered and streamed', async () => {
    const response = await buffered({ text: { format } })
    expect(JSON.parse(response.output[0].content[0].text)).toEqual({ name: 'market', population: 1 })
    expect(response.text.format).toEqual(format)
    const events = await streamed({ text: { format } })
    const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta)
    expect(JSON.parse(text.join(''))).toEqual({ name: 'market', population: 1 })
  })

  test('reasoning.effort reaches the supplier; its reasoning is a reasoning item with its tokens', async () => {
    const response = await buffered({ model: 'qwen3-4b', reasoning: { effort: 'low' } })
    expect(response.output.map((item: Json) => item.type)).toEqual(['reasoning', 'message'])
    expect(response.output[0].content).toEqual([{ type: 'reasoning_text', text: 'weighing the' }])
    expect(response.usage.output_tokens_details.reasoning_tokens).toBe(2)
    expect(response.usage.output_tokens).toBe(8)
    expect(response.reasoning).toEqual({ effort: 'low', summary: null })

    const events = await streamed({ model: 'qwen3-4b', reasoning: { effort: 'low', summary: 'auto' } })
    const types = events.map((e) => e.type)
    expect(types.slice(0, 5)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.reasoning_summary_part.added',
      'response.reasoning_summary_text.delta',
    ])
    const reasoningDone = events.find((e) => e.type === 'response.output_item.done')!
    expect(reasoningDone.item).toMatchObject({
      type: 'reasoning',
      summary: [{ type: 'summary_text', text: 'weighing the' }],
    })
    // The reasoning item closes before the message opens.
    expect(types.indexOf('response.output_item.done')).toBeLessThan(
      types.lastIndexOf('response.output_item.added'),
    )
    const completed = events.at(-1)!
    expect(completed.response.usage.output_tokens_details.reasoning_tokens).toBe(2)
  })
})

describe('cut at max_output_tokens', () => {
  test('buffered: incomplete, reason max_output_tokens, with its usage', async () => {
    const response = await buffered({ max_output_tokens: 3 })
    expect(response.status).toBe('incomplete')
    expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' })
    expect(response.output[0].status).toBe('incomplete')
    expect(response.usage.output_tokens).toBe(3)
  })

  test('streamed: response.incomplete, reason max_output_tokens, cost on it, usage key absent', async () => {
    const before = await balances(stack, buyer.accountId)
    const events = await streamed({ max_output_tokens: 3 })
    const last = events.at(-1)!
    expect(last.type).toBe('response.incomplete')
    expect(last.response.incomplete_details).toEqual({ reason: 'max_output_tokens' })
    expect(last.response.output[0].status).toBe('incomplete')
    expect('usage' in last.response).toBe(false)
    const charged = before.confirmed - (await balances(stack, buyer.accountId)).confirmed
    expect(last.costUsdc).toBe((charged / 1e6).toFixed(6))
    expect(events.some((e) => e.type === 'response.completed')).toBe(false)
  })
})

describe('what cannot be honoured is a 400 naming it, and nothing moves', () => {
  for (const [field, body] of [
    ['web_search', { tools: [{ type: 'web_search' }] }],
    ['item_reference', { input: [{ type: 'item_reference', id: 'msg_1' }] }],
    ['input_file', { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] }],
    ['conversation', { conversation: 'conv_1' }],
    ['top_logprobs', { top_logprobs: 2 }],
    ['truncation', { truncation: 'auto' }],
    ['text.format', { text: { format: { type: 'grammar' } } }],
    ['tool_choice', { tool_choice: { type: 'web_search' } }],
    ['include', { include: ['message.output_text.logprobs'] }],
    ['metadata', { metadata: { n: 1 } }],
    // Its call in an earlier response: nothing is stored, so an output that answers no call here.
    ['function_call_output', { input: [{ type: 'function_call_output', call_id: 'call_1', output: '{}' }] }],
  ] as [string, Record<string, unknown>][]) {
    test(field, async () => {
      const before = await snapshotKeys(stack.store, stack.keys.prefix)
      const response = await post(body)
      expect(response.status).toBe(400)
      const { error } = (await response.json()) as { error: { message: string; type: string; code: string } }
      expect(error.type).toBe('invalid_request_error')
      expect(error.message).toContain(field)
      expect(moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))).toEqual(
        moneyAndMarketKeys(before),
      )
    })
  }

  test('an input item that is only an id is an item_reference (its type optional): a 400 naming it', async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const response = await post({ input: [{ role: 'user', content: 'hi' }, { id: 'msg_1' }] })
    expect(response.status).toBe(400)
    const { error } = (await response.json()) as { error: { message: string; type: string; code: string } }
    expect(error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter' })
    expect(error.message).toContain('input[1]: item_reference needs a stored response')
    expect(moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))).toEqual(
      moneyAndMarketKeys(before),
    )
  })

  test('store and previous_response_id are accepted, and nothing is stored', async () => {
    const response = await buffered({ store: true, previous_response_id: 'resp_earlier' })
    expect(response.store).toBe(false)
    expect(response.previous_response_id).toBeNull()
  })
})
