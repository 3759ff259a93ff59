// What OpenAI's chat completions API refuses, the gateway refuses too, through the openai SDK over
// real HTTP: a 400 naming the field, before anything is held, so nothing changes in Redis. A
// supplier may take these silently and answer a question the client did not ask.
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

const fn = (name: string) => ({
  type: 'function' as const,
  function: { name, parameters: { type: 'object', properties: { city: { type: 'string' } } } },
})
const weather = fn('get_weather')
const call = (id: string) => ({
  id,
  type: 'function' as const,
  function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
})
const ask = { role: 'user' as const, content: 'Weather in Paris?' }

// lastUsedAt of the key may be written once a minute; money and market keys must not move.

type Body = Partial<OpenAI.Chat.ChatCompletionCreateParamsNonStreaming>

for (const [why, named, body] of [
  ['temperature above 2', 'temperature', { temperature: 2.5 }],
  ['temperature below 0', 'temperature', { temperature: -0.5 }],
  ['top_p above 1', 'top_p', { top_p: 1.5 }],
  ['top_p below 0', 'top_p', { top_p: -0.1 }],
  ['presence_penalty above 2', 'presence_penalty', { presence_penalty: 2.5 }],
  ['presence_penalty below -2', 'presence_penalty', { presence_penalty: -3 }],
  ['frequency_penalty above 2', 'frequency_penalty', { frequency_penalty: 3 }],
  ['frequency_penalty below -2', 'frequency_penalty', { frequency_penalty: -2.5 }],
  ['n of 0', 'n', { n: 0 }],
  ['n above 128', 'n', { n: 129 }],
  ["tool_choice 'required' without tools", 'tool_choice', { tool_choice: 'required' }],
  [
    'tool_choice naming a function not in tools',
    'tool_choice',
    { tools: [weather], tool_choice: { type: 'function', function: { name: 'get_time' } } },
  ],
  ['two tools of one function name', 'tools', { tools: [weather, fn('get_time'), weather] }],
  ['a logit_bias above 100', 'logit_bias', { logit_bias: { '1234': 150 } }],
  ['a logit_bias below -100', 'logit_bias', { logit_bias: { '1234': -101 } }],
  ['more than 4 stop sequences', 'stop', { stop: ['a', 'b', 'c', 'd', 'e'] }],
  [
    'a tool message answering no tool call',
    'tool_call_id',
    { tools: [weather], messages: [ask, { role: 'tool', tool_call_id: 'call_9', content: 'sunny' }] },
  ],
  [
    'a tool message answering a call no assistant made',
    'tool_call_id',
    {
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: null, tool_calls: [call('call_1')] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        { role: 'tool', tool_call_id: 'call_2', content: 'rain' },
      ],
    },
  ],
  [
    "an assistant's tool call unanswered before the next user turn",
    'tool_call_id',
    {
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: null, tool_calls: [call('call_1'), call('call_2')] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        { role: 'user', content: 'And?' },
      ],
    },
  ],
  [
    "an assistant's tool call unanswered at the end of the messages",
    'tool_call_id',
    { tools: [weather], messages: [ask, { role: 'assistant', content: null, tool_calls: [call('call_1')] }] },
  ],
] as [string, string, Body][]) {
  for (const stream of [false, true]) {
    test(`${why}${stream ? ', streamed' : ''}: a 400 naming ${named}, nothing held`, async () => {
      const before = moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))
      const error = await client.chat.completions
        .create({
          model: 'llama-3.3-70b',
          messages: [{ role: 'user', content: 'hello' }],
          ...body,
          stream,
        } as OpenAI.Chat.ChatCompletionCreateParams)
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

test('the edges OpenAI allows are answered', async () => {
  for (const body of [
    { temperature: 0, top_p: 1, presence_penalty: -2, frequency_penalty: 2 },
    { temperature: 2, top_p: 0, presence_penalty: 2, frequency_penalty: -2 },
    { temperature: null, top_p: null, presence_penalty: null, frequency_penalty: null, logit_bias: null },
    { logit_bias: { '1234': 100, '5678': -100 }, stop: ['a', 'b', 'c', 'd'] },
    { stop: 'a', n: 2 },
    { tools: [weather], tool_choice: 'none' },
    { tools: [weather], tool_choice: 'required' },
    { tools: [weather], tool_choice: { type: 'function', function: { name: 'get_weather' } } },
    // Each call answered, in any order, with a system message among the answers.
    {
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: null, tool_calls: [call('call_1'), call('call_2')] },
        { role: 'tool', tool_call_id: 'call_2', content: 'rain' },
        { role: 'system', content: 'Be brief.' },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        { role: 'user', content: 'And tomorrow?' },
      ],
    },
  ] as Body[]) {
    const completion = await client.chat.completions.create({
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'hello' }],
      ...body,
    })
    expect(completion.choices.length).toBeGreaterThan(0)
  }
})
