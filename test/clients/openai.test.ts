// openai-node against the gateway: tool calls and structured output on chat and on Responses,
// the stream helpers, and the runTools loop; the simulated supplier answers as a real model does.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { zodFunction, zodResponseFormat, zodResponsesFunction, zodTextFormat } from 'openai/helpers/zod'
import { z } from 'zod'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let client: OpenAI

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40)
  const buyer = await fundedBuyer(stack)
  client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
})
afterAll(() => stack.stop())

const City = z.object({ name: z.string(), population: z.number().int(), capital: z.boolean() })
const Weather = z.object({ city: z.string() })

describe('chat completions', () => {
  test('runTools calls the tool with parsed arguments, then ends on the answer', async () => {
    const calls: { city: string }[] = []
    const runner = client.chat.completions.runTools({
      model: 'svc/llama-3.3-70b',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [
        zodFunction({
          name: 'get_weather',
          parameters: Weather,
          function: (args: { city: string }) => {
            calls.push(args)
            return 'sunny'
          },
        }),
      ],
    })
    const answer = await runner.finalContent()
    expect(calls).toEqual([{ city: 'market' }])
    expect(answer?.split(' ')).toHaveLength(5)
    // The assistant's call and the tool's result went back as chat turns.
    expect(runner.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant'])
  })

  test('chat.completions.parse with a zod response format', async () => {
    const completion = await client.chat.completions.parse({
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'A city.' }],
      response_format: zodResponseFormat(City, 'city'),
    })
    expect(completion.choices[0]!.message.parsed).toEqual({ name: 'market', population: 1, capital: true })
  })
})

describe('responses', () => {
  test('responses.parse with a zod text format gives output_parsed', async () => {
    const response = await client.responses.parse({
      model: 'llama-3.3-70b',
      input: 'A city.',
      text: { format: zodTextFormat(City, 'city') },
    })
    expect(response.output_parsed).toEqual({ name: 'market', population: 1, capital: true })
    expect(response.status).toBe('completed')
  })

  test('function tools: a parsed call, then its output sent back as function_call_output', async () => {
    const tool = zodResponsesFunction({ name: 'get_weather', parameters: Weather })
    const first = await client.responses.parse({ model: 'llama-3.3-70b', input: 'Weather?', tools: [tool] })
    const call = first.output.find((item) => item.type === 'function_call')!
    expect(call.name).toBe('get_weather')
    expect(call.parsed_arguments).toEqual({ city: 'market' })
    const second = await client.responses.create({
      model: 'llama-3.3-70b',
      input: [
        { role: 'user', content: 'Weather?' },
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: call.call_id, output: 'sunny' },
      ],
      tools: [tool],
    })
    expect(second.output_text.split(' ')).toHaveLength(5)
  })

  test('responses.stream: function-call argument deltas build the final call', async () => {
    const runner = client.responses.stream({
      model: 'llama-3.3-70b',
      input: 'Weather?',
      tools: [zodResponsesFunction({ name: 'get_weather', parameters: Weather })],
    })
    let deltas = ''
    runner.on('response.function_call_arguments.delta', (event) => {
      deltas += event.delta
    })
    const final = await runner.finalResponse()
    const call = final.output.find((item) => item.type === 'function_call')!
    expect(call.arguments).toBe(deltas)
    expect(call.parsed_arguments).toEqual({ city: 'market' })
    expect(final.usage!.output_tokens).toBeGreaterThan(1)
  })

  test('responses.stream with a reasoning model: reasoning item, then the text', async () => {
    const runner = client.responses.stream({
      model: 'qwen3-4b',
      input: 'Think.',
      reasoning: { effort: 'low' },
    })
    const final = await runner.finalResponse()
    expect(final.output.map((item) => item.type)).toEqual(['reasoning', 'message'])
    expect(final.output_text.split(' ')).toHaveLength(5)
    expect(final.usage!.output_tokens_details.reasoning_tokens).toBe(2)
  })

  test('cut at max_output_tokens: status incomplete, buffered and streamed', async () => {
    const buffered = await client.responses.create({
      model: 'llama-3.3-70b',
      input: 'x',
      max_output_tokens: 2,
    })
    expect(buffered.status).toBe('incomplete')
    expect(buffered.incomplete_details?.reason).toBe('max_output_tokens')
    const streamed = await client.responses
      .stream({ model: 'llama-3.3-70b', input: 'x', max_output_tokens: 2 })
      .finalResponse()
    expect(streamed.status).toBe('incomplete')
    expect(streamed.incomplete_details?.reason).toBe('max_output_tokens')
  })
})
