// LangChain JS (@langchain/openai) against the gateway, on chat completions and on the Responses
// API: tool calls through bindTools, structured output, streamed usage; the simulated supplier
// answers as a real model does.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { HumanMessage, ToolMessage } from '@langchain/core/messages'
import { tool } from '@langchain/core/tools'
import { ChatOpenAI } from '@langchain/openai'
import { z } from 'zod'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let apiKey: string

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40)
  apiKey = (await fundedBuyer(stack)).apiKey
})
afterAll(() => stack.stop())

const getWeather = tool(async ({ city }: { city: string }) => `sunny in ${city}`, {
  name: 'get_weather',
  description: 'The weather in a city',
  schema: z.object({ city: z.string() }),
})

const City = z.object({ name: z.string(), population: z.number().int() })

function model(useResponsesApi: boolean, extra: Record<string, unknown> = {}) {
  return new ChatOpenAI({
    model: 'llama-3.3-70b',
    apiKey,
    configuration: { baseURL: `${stack.url}/v1` },
    useResponsesApi,
    maxRetries: 0,
    ...extra,
  })
}

for (const [api, useResponsesApi] of [
  ['chat completions', false],
  ['responses', true],
] as const) {
  describe(api, () => {
    test('bindTools: a tool call, then the answer once its result is sent back', async () => {
      const bound = model(useResponsesApi).bindTools([getWeather])
      const question = new HumanMessage('Weather in Paris?')
      const first = await bound.invoke([question])
      expect(first.tool_calls).toEqual([
        {
          id: expect.stringMatching(/^call_/),
          name: 'get_weather',
          args: { city: 'market' },
          type: 'tool_call',
        },
      ])
      const call = first.tool_calls![0]!
      const result = new ToolMessage({
        content: await getWeather.invoke(call.args as { city: string }),
        tool_call_id: call.id!,
      })
      const second = await bound.invoke([question, first, result])
      expect(second.tool_calls ?? []).toEqual([])
      expect(second.text.split(' ')).toHaveLength(5)
    })

    test('withStructuredOutput: parsed to the schema', async () => {
      const structured = model(useResponsesApi).withStructuredOutput(City, { name: 'city' })
      expect(await structured.invoke('A city.')).toEqual({ name: 'market', population: 1 })
    })

    test('a stream carries the usage', async () => {
      let usage: { output_tokens: number } | undefined
      let text = ''
      for await (const chunk of await model(useResponsesApi, { streamUsage: true }).stream('hi')) {
        text += chunk.text
        usage = (chunk.usage_metadata as typeof usage) ?? usage
      }
      expect(text.split(' ')).toHaveLength(5)
      expect(usage?.output_tokens).toBe(5)
    })
  })
}
