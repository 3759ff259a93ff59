// What Anthropic's Messages API refuses, /v1/messages refuses too, through Anthropic's SDK over real
// HTTP: a 400 in Anthropic's shape naming the field, before anything is held, so nothing changes in
// Redis. A chat supplier may take these silently and answer a question the client did not ask.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { moneyAndMarketKeys, snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let client: Anthropic

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40)
  const buyer = await fundedBuyer(stack)
  client = new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
})
afterAll(() => stack.stop())

const tool = (name: string): Anthropic.Tool => ({
  name,
  input_schema: { type: 'object', properties: { city: { type: 'string' } } },
})
const weather = tool('get_weather')
const ask = { role: 'user' as const, content: 'Weather in Paris?' }
const use = (id: string) => ({ type: 'tool_use' as const, id, name: 'get_weather', input: { city: 'Paris' } })
const result = (id: string) => ({ type: 'tool_result' as const, tool_use_id: id, content: 'sunny' })

// lastUsedAt of the key may be written once a minute; money and market keys must not move.

type Body = Partial<Anthropic.MessageCreateParamsNonStreaming> & Record<string, unknown>

for (const [why, named, body] of [
  ['temperature above 1', 'temperature', { temperature: 1.5 }],
  ['temperature below 0', 'temperature', { temperature: -0.1 }],
  ['two tools of one name', 'tools', { tools: [weather, tool('get_time'), weather] }],
  [
    'a tool_result answering no tool_use',
    'tool_use_id',
    { tools: [weather], messages: [{ role: 'user', content: [result('toolu_9')] }] },
  ],
  [
    'a tool_result answering a tool_use no assistant made',
    'tool_use_id',
    {
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: [use('toolu_1')] },
        { role: 'user', content: [result('toolu_1'), result('toolu_2')] },
      ],
    },
  ],
  // As Anthropic: each tool_use is answered in the very next message, a final turn's too.
  ...(
    [
      [
        'answered by no tool_result',
        [ask, { role: 'assistant', content: [use('toolu_1')] }, ask],
        1,
        'toolu_1',
      ],
      [
        'answered only in a later turn',
        [
          ask,
          { role: 'assistant', content: [use('toolu_1')] },
          ask,
          { role: 'assistant', content: 'Looking.' },
          { role: 'user', content: [result('toolu_1')] },
        ],
        1,
        'toolu_1',
      ],
      [
        'of two, one answered',
        [
          ask,
          { role: 'assistant', content: [use('toolu_1'), use('toolu_2')] },
          { role: 'user', content: [result('toolu_1')] },
        ],
        1,
        'toolu_2',
      ],
      [
        'in the final message',
        [
          ask,
          { role: 'assistant', content: [use('toolu_1')] },
          { role: 'user', content: [result('toolu_1')] },
          { role: 'assistant', content: [{ type: 'text', text: 'Again.' }, use('toolu_3')] },
        ],
        3,
        'toolu_3',
      ],
    ] as [string, Body['messages'], number, string][]
  ).map(([why, messages, at, id]): [string, string, Body] => [
    `a tool_use ${why}`,
    `messages[${at}]: tool_use ids were found without tool_result blocks immediately after: ${id}`,
    { tools: [weather], messages },
  ]),
  ['an empty text block', 'text', { messages: [{ role: 'user', content: [{ type: 'text', text: '' }] }] }],
  ['an empty system text block', 'system', { system: [{ type: 'text', text: '' }] }],
  [
    "an empty text block in the assistant's turn",
    'text',
    {
      messages: [
        ask,
        { role: 'assistant', content: [{ type: 'text', text: '' }] },
        { role: 'user', content: 'And?' },
      ],
    },
  ],
] as [string, string, Body][]) {
  for (const stream of [false, true]) {
    test(`${why}${stream ? ', streamed' : ''}: a 400 naming ${named}, nothing held`, async () => {
      const before = moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))
      const error = await client.messages
        .create({
          model: 'llama-3.3-70b',
          max_tokens: 50,
          messages: [{ role: 'user', content: 'hello' }],
          ...body,
          stream,
        } as Anthropic.MessageCreateParams)
        .then(
          () => null,
          (e: unknown) => e,
        )
      expect(error).toBeInstanceOf(Anthropic.BadRequestError)
      const refused = error as InstanceType<typeof Anthropic.BadRequestError>
      expect(refused.error).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } })
      expect((refused.error as { error: { message: string } }).error.message).toContain(named)
      expect(moneyAndMarketKeys(await snapshotKeys(stack.store, stack.keys.prefix))).toEqual(before)
    })
  }
}

test('the edges Anthropic allows are answered', async () => {
  for (const body of [
    { temperature: 0 },
    { temperature: 1 },
    { tools: [weather, tool('get_time')] },
    // Each call answered, an error result among them, and text beside the results.
    {
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: [{ type: 'text', text: 'Looking.' }, use('toolu_1'), use('toolu_2')] },
        {
          role: 'user',
          content: [
            result('toolu_1'),
            { type: 'tool_result', tool_use_id: 'toolu_2', is_error: true },
            { type: 'text', text: 'Thanks.' },
          ],
        },
      ],
    },
    // A system message between the calls and their results, and a final turn of text (a prefill).
    {
      tools: [weather],
      messages: [
        ask,
        { role: 'assistant', content: [use('toolu_1')] },
        { role: 'system', content: 'Answer in French.' },
        { role: 'user', content: [result('toolu_1')] },
        { role: 'assistant', content: 'Il fait' },
      ],
    },
  ] as Body[]) {
    const message = await client.messages.create({
      model: 'llama-3.3-70b',
      max_tokens: 50,
      messages: [{ role: 'user', content: 'hello' }],
      ...body,
    } as Anthropic.MessageCreateParamsNonStreaming)
    expect(message.type).toBe('message')
  }
})
