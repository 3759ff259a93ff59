// count_tokens counts what /v1/messages sends the supplier for the same prompt: its tools, and the
// tool_choice and output_config.format that ride beside them. A Messages stream's message_start
// gives the gateway's count of that prompt, so a client that counts first and then streams (Claude
// Code, LangChain) reads one number for one prompt, not two.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import type { TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 9 } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(() => stack.stop())

const client = () => new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })

const weather = {
  name: 'get_weather',
  description: 'The weather in a city, now',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
}
const prompt = {
  model: 'llama-3.3-70b',
  system: 'Answer in one line.',
  messages: [{ role: 'user' as const, content: 'What is the weather in Paris?' }],
}
const asks: Record<string, Record<string, unknown>> = {
  'tools and a tool_choice': { tools: [weather], tool_choice: { type: 'tool', name: 'get_weather' } },
  'an output_config.format': {
    output_config: {
      format: { type: 'json_schema', schema: { type: 'object', properties: { sky: { type: 'string' } } } },
    },
  },
}

describe("count_tokens gives a stream's message_start count for the same prompt", () => {
  for (const [name, fields] of Object.entries(asks)) {
    test(name, async () => {
      const ask = { ...prompt, ...fields } as Anthropic.MessageCountTokensParams
      const counted = (await client().messages.countTokens(ask)).input_tokens
      const stream = await client().messages.create({
        ...(ask as Anthropic.MessageCreateParamsStreaming),
        max_tokens: 20,
        stream: true,
      })
      let started = -1
      for await (const event of stream) {
        if (event.type === 'message_start') started = event.message.usage.input_tokens
      }
      expect(started).toBeGreaterThan(0)
      expect(counted).toBe(started)
    })
  }
})
