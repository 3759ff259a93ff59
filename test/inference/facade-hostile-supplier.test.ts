// The Responses and Messages facades given what a supplier may send that chat relays as it is: a
// tool call that is null. Each route answers and charges the same as chat does, buffered and
// streamed, and a stream never leaves its hold behind.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer } from '../helpers/buyers.ts'
import {
  type HostileAnswer,
  type HostileSupplier,
  hostileSupplier,
  sseAnswer,
  wholeAnswer,
} from '../helpers/hostile-supplier.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
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

describe('a null tool call', () => {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}`

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
