// The AI SDK's Anthropic provider (@ai-sdk/anthropic) against POST /v1/messages: generateText,
// streamText, a tool loop and structured output (Output.object and generateObject), with usage and
// finish reasons as a real model gives them; the simulated supplier answers.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createAnthropic } from '@ai-sdk/anthropic'
import { generateObject, generateText, isStepCount, type LanguageModel, Output, streamText, tool } from 'ai'
import { z } from 'zod'
import type { TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let model: (id: string) => LanguageModel

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack)
  const anthropic = createAnthropic({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1` })
  model = (id) => anthropic(id)
})
afterAll(() => stack.stop())

test('generateText: the answer, its usage, finish reason stop, charged for that usage', async () => {
  const before = await balances(stack, buyer.accountId)
  const result = await generateText({ model: model('svc/llama-3.3-70b'), prompt: 'hi', maxRetries: 0 })
  expect(result.text.split(' ')).toHaveLength(5)
  expect(result.finishReason).toBe('stop')
  expect(result.usage.outputTokens).toBe(5)
  const after = await balances(stack, buyer.accountId)
  const input = result.usage.inputTokens!
  expect(before.confirmed - after.confirmed).toBe(
    expectedCost({ prompt_tokens: input, completion_tokens: 5 }, 40),
  )
  expect(after.held).toBe(0)
})

test('generateText with a tool: the call is executed and the loop ends on the answer', async () => {
  const seen: unknown[] = []
  const result = await generateText({
    model: model('llama-3.3-70b'),
    prompt: 'Weather in Paris?',
    tools: {
      get_weather: tool({
        description: 'The weather in a city',
        inputSchema: z.object({ city: z.string() }),
        execute: async (input) => {
          seen.push(input)
          return 'sunny'
        },
      }),
    },
    stopWhen: isStepCount(3),
    maxRetries: 0,
  })
  expect(seen).toEqual([{ city: 'market' }])
  expect(result.steps).toHaveLength(2)
  expect(result.steps[0]!.finishReason).toBe('tool-calls')
  expect(result.finishReason).toBe('stop')
  expect(result.text.split(' ')).toHaveLength(5)
})

test('structured output with generateText (Output.object): parsed to the schema', async () => {
  const result = await generateText({
    model: model('llama-3.3-70b'),
    prompt: 'A city.',
    output: Output.object({ schema: z.object({ name: z.string(), population: z.number().int() }) }),
    maxRetries: 0,
  })
  expect(result.output).toEqual({ name: 'market', population: 1 })
})

test('generateObject (deprecated in ai 7 for Output.object, still shipped): the same object', async () => {
  const result = await generateObject({
    model: model('llama-3.3-70b'),
    schema: z.object({ name: z.string(), population: z.number().int() }),
    prompt: 'A city.',
    maxRetries: 0,
  })
  expect(result.object).toEqual({ name: 'market', population: 1 })
  expect(result.finishReason).toBe('stop')
})

test('streamText: usage and finish reason stop; cut at the limit: finish reason length', async () => {
  const whole = streamText({ model: model('llama-3.3-70b'), prompt: 'hi', maxRetries: 0 })
  expect((await whole.text).split(' ')).toHaveLength(5)
  expect(await whole.finishReason).toBe('stop')
  const usage = await whole.usage
  expect(usage.outputTokens).toBe(5)
  expect(usage.inputTokens).toBeGreaterThan(0)

  const cut = streamText({ model: model('llama-3.3-70b'), prompt: 'hi', maxOutputTokens: 2, maxRetries: 0 })
  expect((await cut.text).split(' ')).toHaveLength(2)
  expect(await cut.finishReason).toBe('length')
})

test('streamText with a tool and a reasoning model: reasoning, then the call', async () => {
  const result = streamText({
    model: model('qwen3-4b'),
    prompt: 'Weather?',
    // The provider adds the thinking budget to the limit: kept within the model's 4096.
    maxOutputTokens: 2000,
    tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }) }) },
    providerOptions: { anthropic: { thinking: { type: 'enabled', budgetTokens: 1024 } } },
    maxRetries: 0,
  })
  expect(await result.finishReason).toBe('tool-calls')
  expect((await result.reasoningText)!.length).toBeGreaterThan(0)
  expect((await result.toolCalls).map((call) => call.input)).toEqual([{ city: 'market' }])
})
