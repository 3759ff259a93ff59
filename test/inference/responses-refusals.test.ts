// What OpenAI's Responses API refuses, the facade refuses too, through the openai SDK over real
// HTTP: a 400 naming the field, before anything is held, so nothing changes in Redis. A supplier
// may take these silently and answer a question the agent did not ask.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { moneyAndMarketKeys, snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let client: OpenAI

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40)
  const buyer = await fundedBuyer(stack)
  client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
})
afterAll(() => stack.stop())

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  strict: false,
}

// lastUsedAt of the key may be written once a minute; money and market keys must not move.

type Body = Partial<OpenAI.Responses.ResponseCreateParamsNonStreaming>

for (const [why, named, body] of [
  ['temperature above 2', 'temperature', { temperature: 2.5 }],
  ['temperature below 0', 'temperature', { temperature: -0.5 }],
  ['top_p above 1', 'top_p', { top_p: 1.5 }],
  // The chat limit's refusal, in the name of the field this request sent.
  ["max_output_tokens above the model's limit", 'max_output_tokens', { max_output_tokens: 1_000_000 }],
  ["tool_choice 'required' without tools", 'tool_choice', { tool_choice: 'required' }],
  [
    'tool_choice naming a function not in tools',
    'tool_choice',
    { tools: [weather], tool_choice: { type: 'function', name: 'get_time' } },
  ],
  [
    'a function_call sent back without its output',
    'function_call',
    {
      tools: [weather],
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      ],
    },
  ],
] as [string, string, Body][]) {
  for (const stream of [false, true]) {
    test(`${why}${stream ? ', streamed' : ''}: a 400 naming ${named}, nothing held`, async () => {
      const before = moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))
      const error = await client.responses
        .create({
          model: 'llama-3.3-70b',
          input: 'hello',
          ...body,
          stream,
        } as OpenAI.Responses.ResponseCreateParams)
        .then(
          () => null,
          (e: unknown) => e,
        )
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      const refused = error as InstanceType<typeof OpenAI.BadRequestError>
      expect(refused.type).toBe('invalid_request_error')
      expect(refused.message).toContain(named)
      expect(moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))).toEqual(before)
    })
  }
}

test('the edges OpenAI allows are answered: temperature 0 and 2, top_p 0 and 1, tool_choice none', async () => {
  for (const body of [
    { temperature: 0, top_p: 1 },
    { temperature: 2, top_p: 0 },
    { tools: [weather], tool_choice: 'none' },
    { tools: [weather], tool_choice: { type: 'function', name: 'get_weather' } },
  ] as Body[]) {
    const response = await client.responses.create({ model: 'llama-3.3-70b', input: 'hello', ...body })
    expect(response.status).toBe('completed')
  }
})
