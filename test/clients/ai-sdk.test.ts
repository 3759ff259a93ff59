// The Vercel AI SDK against the gateway: its default OpenAI model (the Responses API) and the
// OpenAI-compatible provider (chat completions), each with tools, structured output and streamed
// usage and finish reasons; the simulated supplier answers as a real model does.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createOpenAI } from '@ai-sdk/openai'
import { createOpenAICompatible } from '@ai-sdk/openai-compatible'
import { generateText, isStepCount, type LanguageModel, Output, streamText, tool } from 'ai'
import { z } from 'zod'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyerKey: string
const models: Record<string, (id: string) => LanguageModel> = {}

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40)
  const buyer = await fundedBuyer(stack)
  buyerKey = buyer.apiKey
  const baseURL = `${stack.url}/v1`
  // The default model of @ai-sdk/openai is the Responses API.
  const openai = createOpenAI({ apiKey: buyer.apiKey, baseURL })
  models.responses = (id) => openai(id)
  const compatible = createOpenAICompatible({
    name: 'svc',
    apiKey: buyer.apiKey,
    baseURL,
    includeUsage: true,
    supportsStructuredOutputs: true,
  })
  models.compatible = (id) => compatible(id)
})
afterAll(() => stack.stop())

const City = z.object({ name: z.string(), population: z.number().int() })

for (const provider of ['responses', 'compatible'] as const) {
  describe(provider, () => {
    test('generateText with a tool: the call is executed and the loop ends on the answer', async () => {
      const seen: unknown[] = []
      const result = await generateText({
        model: models[provider]!('svc/llama-3.3-70b'),
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

    test('structured output (Output.object, what generateObject was): parsed to the schema', async () => {
      const result = await generateText({
        model: models[provider]!('llama-3.3-70b'),
        prompt: 'A city.',
        output: Output.object({ schema: City }),
        maxRetries: 0,
      })
      expect(result.output).toEqual({ name: 'market', population: 1 })
    })

    test('streamText: usage and finish reason stop; cut at the limit: finish reason length', async () => {
      const whole = streamText({ model: models[provider]!('llama-3.3-70b'), prompt: 'hi', maxRetries: 0 })
      expect((await whole.text).split(' ')).toHaveLength(5)
      expect(await whole.finishReason).toBe('stop')
      const usage = await whole.usage
      expect(usage.outputTokens).toBe(5)
      expect(usage.inputTokens).toBeGreaterThan(0)

      const cut = streamText({
        model: models[provider]!('llama-3.3-70b'),
        prompt: 'hi',
        maxOutputTokens: 2,
        maxRetries: 0,
      })
      expect((await cut.text).split(' ')).toHaveLength(2)
      expect(await cut.finishReason).toBe('length')
    })
  })
}

test('responses: a reasoning model streams its reasoning, counted in the usage', async () => {
  const result = streamText({
    model: models.responses!('qwen3-4b'),
    prompt: 'Think.',
    // The SDK knows OpenAI's reasoning models by name; any other is named one here.
    providerOptions: {
      openai: { forceReasoning: true, reasoningEffort: 'low', reasoningSummary: 'auto', store: false },
    },
    maxRetries: 0,
  })
  expect((await result.text).split(' ')).toHaveLength(5)
  expect(await result.reasoningText).toBe('weighing the')
  expect((await result.usage).outputTokenDetails.reasoningTokens).toBe(2)
})

test('responses: a reasoning model in a tool loop, the SDK storing by default (reasoning sent back by reference)', async () => {
  const sent: { input: { type?: string; id?: string }[] }[] = []
  const watched = createOpenAI({
    apiKey: buyerKey,
    baseURL: `${stack.url}/v1`,
    fetch: Object.assign(
      async (url: string | URL | Request, init?: RequestInit) => {
        sent.push(JSON.parse(String(init?.body)))
        return fetch(url, init)
      },
      { preconnect: fetch.preconnect },
    ),
  })
  const result = await generateText({
    model: watched('qwen3-4b'),
    prompt: 'Weather in Paris?',
    tools: {
      get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => 'sunny' }),
    },
    stopWhen: isStepCount(3),
    providerOptions: { openai: { forceReasoning: true } },
    maxRetries: 0,
  })
  expect(result.steps.map((step) => step.finishReason)).toEqual(['tool-calls', 'stop'])
  expect(sent[1]!.input.some((item) => item.type === 'item_reference' && item.id?.startsWith('rs_'))).toBe(
    true,
  )
})
