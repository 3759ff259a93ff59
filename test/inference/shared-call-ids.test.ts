// Parallel tool calls under one id, as some suppliers (DeepSeek, GLM) stream them: each call keeps
// its own place and arguments, and no two calls of an answer share an id. Read with the real SDKs:
// openai's responses.stream refuses a second function_call with a call_id already seen, and a
// client answering the calls by id could not tell them apart. The buffered answers agree.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { TestAccount } from '../helpers/accounts.ts'
import { adminFetch } from '../helpers/accounts.ts'
import { balances, fundedBuyer } from '../helpers/buyers.ts'
import { type HostileSupplier, hostileSupplier, sseAnswer, wholeAnswer } from '../helpers/hostile-supplier.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const USAGE = { prompt_tokens: 5, completion_tokens: 40, total_tokens: 45 }
const CALLS = [
  { name: 'get_weather', args: '{"city":"Paris"}' },
  { name: 'get_weather', args: '{"city":"Oslo"}' },
]
const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-d', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}`

let stack: TestStack
let hostile: HostileSupplier
let buyer: TestAccount

beforeAll(async () => {
  hostile = hostileSupplier((call) => {
    if ((JSON.parse(call.body) as { stream?: boolean }).stream) {
      return sseAnswer([
        chunk({ role: 'assistant', content: '' }),
        ...CALLS.map((c, index) =>
          chunk({
            tool_calls: [
              { index, id: 'call_0', type: 'function', function: { name: c.name, arguments: c.args } },
            ],
          }),
        ),
        chunk({}, 'tool_calls'),
        `data: ${JSON.stringify({ id: 'chatcmpl-d', object: 'chat.completion.chunk', choices: [], usage: USAGE })}`,
        'data: [DONE]',
      ])
    }
    const toolCalls = CALLS.map((c) => ({
      id: 'call_0',
      type: 'function',
      function: { name: c.name, arguments: c.args },
    }))
    return wholeAnswer(
      200,
      JSON.stringify({
        id: 'chatcmpl-d',
        object: 'chat.completion',
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: null, tool_calls: toolCalls },
            finish_reason: 'tool_calls',
          },
        ],
        usage: USAGE,
      }),
    )
  })
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

const settled = () => until(async () => (await balances(stack, buyer.accountId)).held === 0)
const openai = () => new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
const anthropic = () => new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })

/** Two calls with their own ids, the first the supplier's, each with its own arguments. */
function expectDistinct(calls: { id: string; args: unknown }[], args: unknown[]) {
  expect(calls.map((c) => c.args)).toEqual(args)
  expect(calls[0]!.id).toBe('call_0')
  expect(new Set(calls.map((c) => c.id)).size).toBe(calls.length)
}

test('/v1/responses: calls sharing an id stream to openai responses.stream, each with an id of its own', async () => {
  const params = {
    model: 'llama-3.3-70b',
    input: 'hi',
    tools: [
      { type: 'function' as const, name: 'get_weather', parameters: { type: 'object' }, strict: false },
    ],
  }
  const fromOutput = (output: OpenAI.Responses.ResponseOutputItem[]) =>
    output.flatMap((i) => (i.type === 'function_call' ? [{ id: i.call_id, args: i.arguments }] : []))
  const final = await openai().responses.stream(params).finalResponse()
  await settled()
  expect(final.status).toBe('completed')
  expectDistinct(
    fromOutput(final.output),
    CALLS.map((c) => c.args),
  )

  const whole = await openai().responses.create(params)
  await settled()
  expectDistinct(
    fromOutput(whole.output),
    CALLS.map((c) => c.args),
  )
})

test('/v1/messages: calls sharing an id become tool_use blocks with ids of their own, streamed and buffered', async () => {
  const params = {
    model: 'llama-3.3-70b',
    max_tokens: 256,
    tools: [{ name: 'get_weather', input_schema: { type: 'object' as const } }],
    messages: [{ role: 'user' as const, content: 'hi' }],
  }
  const fromContent = (content: { type: string; id?: string; input?: unknown }[]) =>
    content.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id!, args: b.input }))
  const inputs = CALLS.map((c) => JSON.parse(c.args))
  const final = await anthropic().messages.stream(params).finalMessage()
  await settled()
  expectDistinct(fromContent(final.content), inputs)

  const whole = await anthropic().messages.create(params)
  await settled()
  expectDistinct(fromContent(whole.content), inputs)
})
