// What the simulated supplier answers, as real models do: a tool call when tools are offered, JSON
// that fits a requested schema, finish_reason "length" at the limit, reasoning from a reasoning
// model, a stop sequence named when it ended the words; buffered and streamed, over real HTTP.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { type SimServer, startSim } from '../../src/sim/server.ts'

let sim: SimServer
beforeAll(() => {
  sim = startSim({ port: 0, outputTokens: 10 })
})
afterAll(() => sim.stop())

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 2 } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
}

function chat(body: Record<string, unknown>) {
  return fetch(`${sim.url}/chat/completions`, {
    method: 'POST',
    headers: { authorization: 'Bearer answers-key', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }], ...body }),
  })
}

type ToolCallDelta = {
  index: number
  id?: string
  type?: string
  function: { name?: string; arguments: string }
}

type Chunk = {
  choices: { delta: Record<string, unknown>; finish_reason: string | null }[]
  usage?: { completion_tokens: number; completion_tokens_details?: { reasoning_tokens: number } }
}

async function chunks(body: Record<string, unknown>): Promise<Chunk[]> {
  const text = await (await chat({ ...body, stream: true, stream_options: { include_usage: true } })).text()
  return text
    .split('\n\n')
    .filter((f) => f.startsWith('data: {'))
    .map((f) => JSON.parse(f.slice(6)) as Chunk)
}

describe('tools', () => {
  test('buffered: a call to the offered tool with arguments that fit its parameters', async () => {
    const body = (await (await chat({ tools: [weather] })).json()) as {
      choices: { message: { content: unknown; tool_calls: unknown[] }; finish_reason: string }[]
    }
    const choice = body.choices[0]!
    expect(choice.finish_reason).toBe('tool_calls')
    expect(choice.message.content).toBeNull()
    expect(choice.message.tool_calls).toEqual([
      {
        id: expect.stringMatching(/^call_/),
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"market","days":2}' },
      },
    ])
  })

  test('streamed: the call opens with its id and name, its arguments come in several deltas', async () => {
    const all = await chunks({ tools: [weather] })
    const calls = all.flatMap((c) => (c.choices[0]?.delta.tool_calls as ToolCallDelta[]) ?? [])
    expect(calls[0]).toMatchObject({ index: 0, id: expect.stringMatching(/^call_/), type: 'function' })
    expect(calls[0]!.function.name).toBe('get_weather')
    expect(calls.length).toBeGreaterThan(3)
    expect(JSON.parse(calls.map((c) => c.function.arguments).join(''))).toEqual({ city: 'market', days: 2 })
    expect(all.at(-2)!.choices[0]!.finish_reason).toBe('tool_calls')
    expect(all.at(-1)!.usage!.completion_tokens).toBe(calls.length - 1)
  })

  test('after a tool result it answers in words; tool_choice "none" never calls', async () => {
    const messages = [
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ]
    for (const body of [
      { messages, tools: [weather] },
      { tools: [weather], tool_choice: 'none' },
    ]) {
      const answer = (await (await chat(body)).json()) as {
        choices: { message: { content: string; tool_calls?: unknown }; finish_reason: string }[]
      }
      expect(answer.choices[0]!.finish_reason).toBe('stop')
      expect(answer.choices[0]!.message.tool_calls).toBeUndefined()
      expect(answer.choices[0]!.message.content.split(' ')).toHaveLength(10)
    }
  })
})

describe('structured output', () => {
  test('json_schema: the content parses and fits the schema ($ref, enum, nullable, arrays)', async () => {
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string' },
        tier: { enum: ['gold', 'silver'] },
        note: { anyOf: [{ type: 'null' }, { type: 'string' }] },
        items: { type: 'array', items: { $ref: '#/$defs/item' } },
      },
      required: ['name', 'tier', 'note', 'items'],
      $defs: { item: { type: 'object', properties: { qty: { type: 'number' } }, required: ['qty'] } },
    }
    const format = { type: 'json_schema', json_schema: { name: 'order', schema, strict: true } }
    const body = (await (await chat({ response_format: format })).json()) as {
      choices: { message: { content: string } }[]
    }
    expect(JSON.parse(body.choices[0]!.message.content)).toEqual({
      name: 'market',
      tier: 'gold',
      note: 'market',
      items: [{ qty: 1 }],
    })
    const streamed = await chunks({ response_format: format })
    const text = streamed.map((c) => c.choices[0]?.delta.content ?? '').join('')
    expect(JSON.parse(text)).toEqual(JSON.parse(body.choices[0]!.message.content))
  })

  test('json_object: a JSON object', async () => {
    const body = (await (await chat({ response_format: { type: 'json_object' } })).json()) as {
      choices: { message: { content: string } }[]
    }
    expect(typeof JSON.parse(body.choices[0]!.message.content)).toBe('object')
  })
})

describe('limits and reasoning', () => {
  test('an answer cut at max_tokens ends with finish_reason "length", buffered and streamed', async () => {
    const body = (await (await chat({ max_tokens: 4 })).json()) as {
      choices: { finish_reason: string }[]
      usage: { completion_tokens: number }
    }
    expect(body.choices[0]!.finish_reason).toBe('length')
    expect(body.usage.completion_tokens).toBe(4)
    const streamed = await chunks({ max_tokens: 3, tools: [weather] })
    expect(streamed.at(-2)!.choices[0]!.finish_reason).toBe('length')
    expect(streamed.at(-1)!.usage!.completion_tokens).toBe(3)
  })

  test('a stop sequence ends the words before it, named as stop_reason (vLLM), buffered and streamed', async () => {
    const body = (await (await chat({ stop: ['cheapest'] })).json()) as {
      choices: { message: { content: string }; finish_reason: string; stop_reason?: string }[]
      usage: { completion_tokens: number }
    }
    expect(body.choices[0]).toMatchObject({ finish_reason: 'stop', stop_reason: 'cheapest' })
    expect(body.choices[0]!.message.content).toBe('the market clears at the')
    expect(body.usage.completion_tokens).toBe(5)
    const streamed = await chunks({ stop: 'cheapest' })
    expect(streamed.at(-2)!.choices[0]).toMatchObject({ finish_reason: 'stop', stop_reason: 'cheapest' })
    // Without a match, no stop_reason at all.
    const plain = (await (await chat({ stop: ['###'] })).json()) as { choices: Record<string, unknown>[] }
    expect(plain.choices[0]!.stop_reason).toBeUndefined()
  })

  test('a reasoning model reasons first (reasoning_content), counted as reasoning tokens', async () => {
    const body = (await (await chat({ model: 'qwen3-4b', reasoning_effort: 'high' })).json()) as {
      choices: { message: { content: string; reasoning_content: string } }[]
      usage: { completion_tokens: number; completion_tokens_details: { reasoning_tokens: number } }
    }
    expect(body.choices[0]!.message.reasoning_content.split(' ')).toHaveLength(8)
    expect(body.usage.completion_tokens_details.reasoning_tokens).toBe(8)
    expect(body.usage.completion_tokens).toBe(18)
    const streamed = await chunks({ model: 'qwen3-4b' })
    const reasoning = streamed.filter((c) => c.choices[0]?.delta.reasoning_content !== undefined)
    expect(reasoning).toHaveLength(4)
    expect(streamed.at(-1)!.usage!.completion_tokens_details!.reasoning_tokens).toBe(4)
    // The plain model does not reason.
    const plain = (await (await chat({})).json()) as { choices: { message: Record<string, unknown> }[] }
    expect(plain.choices[0]!.message.reasoning_content).toBeUndefined()
  })
})
