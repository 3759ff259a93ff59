// LangChain's ChatAnthropic (@langchain/anthropic) against POST /v1/messages, buffered and streamed,
// with a system prompt and tools. LangChain reads a stream's input tokens from message_start alone
// (message_delta's count is taken as 0), so message_start must carry the prompt's tokens, as
// Anthropic's does; the billed count still comes on message_delta for the clients that read it.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { ChatAnthropic } from '@langchain/anthropic'
import { type AIMessageChunk, HumanMessage, SystemMessage, ToolMessage } from '@langchain/core/messages'
import { tool } from '@langchain/core/tools'
import { z } from 'zod'
import type { TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack)
})
afterAll(() => stack.stop())

const model = () =>
  new ChatAnthropic({
    model: 'llama-3.3-70b',
    apiKey: buyer.apiKey,
    anthropicApiUrl: stack.url,
    maxRetries: 0,
    maxTokens: 100,
  })

const getWeather = tool(async ({ city }: { city: string }) => `sunny in ${city}`, {
  name: 'get_weather',
  description: 'The weather in a city',
  schema: z.object({ city: z.string() }),
})

const prompt = [new SystemMessage('Be brief.'), new HumanMessage('Tell me about markets.')]

async function streamed(run: () => Promise<AsyncIterable<AIMessageChunk>>): Promise<AIMessageChunk> {
  let whole: AIMessageChunk | undefined
  for await (const chunk of await run()) whole = whole ? whole.concat(chunk) : chunk
  return whole!
}

test('invoke: the text and the billed usage', async () => {
  const before = await balances(stack, buyer.accountId)
  const answer = await model().invoke(prompt)
  expect(answer.text.split(' ')).toHaveLength(5)
  const usage = answer.usage_metadata!
  expect(usage.output_tokens).toBe(5)
  const after = await balances(stack, buyer.accountId)
  expect(before.confirmed - after.confirmed).toBe(
    expectedCost({ prompt_tokens: usage.input_tokens, completion_tokens: 5 }, 40),
  )
})

test("stream: the usage has the prompt's tokens, as count_tokens counts them", async () => {
  const whole = await streamed(() => model().stream(prompt))
  expect(whole.text.split(' ')).toHaveLength(5)
  const counted = await new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url }).messages.countTokens({
    model: 'llama-3.3-70b',
    system: 'Be brief.',
    messages: [{ role: 'user', content: 'Tell me about markets.' }],
  })
  expect(whole.usage_metadata).toMatchObject({
    input_tokens: counted.input_tokens,
    output_tokens: 5,
    total_tokens: counted.input_tokens + 5,
  })
})

test('bindTools, streamed: the call with its args and the usage, then the answer to its result', async () => {
  const bound = model().bindTools([getWeather])
  const question = new HumanMessage('Weather in Paris?')
  const first = await streamed(() => bound.stream([question]))
  expect(first.tool_calls).toEqual([
    { id: expect.any(String), name: 'get_weather', args: { city: 'market' }, type: 'tool_call' },
  ])
  expect(first.usage_metadata!.input_tokens).toBeGreaterThan(0)
  const call = first.tool_calls![0]!
  const result = new ToolMessage({
    content: await getWeather.invoke(call.args as { city: string }),
    tool_call_id: call.id!,
  })
  const second = await bound.invoke([question, first, result])
  expect(second.tool_calls ?? []).toEqual([])
  expect(second.text.split(' ')).toHaveLength(5)
})
