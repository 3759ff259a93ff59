// The OpenAI Agents SDK against the gateway: real agent loops (the model calls a function tool, the
// SDK runs it and sends its result back, the answer ends the run) over the Responses API, the SDK's
// default, and over chat completions, buffered and streamed; multi-turn runs; and the run's usage
// against what the gateway billed, request by request. The simulated supplier answers as a model does.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import {
  Agent,
  type AgentInputItem,
  type ModelSettings,
  OpenAIProvider,
  Runner,
  setTracingDisabled,
  tool,
  type Usage,
  user,
} from '@openai/agents'
import OpenAI from 'openai'
import { z } from 'zod'
import { parseMicros } from '../../src/money/units.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const ASK_CENTS = 40
let stack: TestStack

beforeAll(async () => {
  // Nothing outside the machine is reachable: no traces are exported.
  setTracingDisabled(true)
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, ASK_CENTS)
})
afterAll(() => stack.stop())

type Api = 'responses' | 'chat_completions'

/** A fresh buyer, and a runner whose every model call goes through the gateway under its key. */
async function agentRunner(api: Api) {
  const buyer = await fundedBuyer(stack)
  // The support reference of every model call the SDK made, in order.
  const references: string[] = []
  const client = new OpenAI({
    apiKey: buyer.apiKey,
    baseURL: `${stack.url}/v1`,
    maxRetries: 0,
    fetch: async (url, init) => {
      const response = await fetch(url, init)
      const reference = response.headers.get('x-svc-support-reference')
      if (reference) references.push(reference)
      return response
    },
  })
  const provider = new OpenAIProvider({ openAIClient: client, useResponses: api === 'responses' })
  return { buyer, references, runner: new Runner({ modelProvider: provider, tracingDisabled: true }) }
}

function weatherAgent(model = 'llama-3.3-70b', modelSettings: ModelSettings = {}) {
  const calls: unknown[] = []
  const getWeather = tool({
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: z.object({ city: z.string() }),
    execute: async (args) => {
      calls.push(args)
      return 'sunny'
    },
  })
  const agent = new Agent({
    name: 'forecaster',
    instructions: 'Answer briefly.',
    model,
    modelSettings,
    tools: [getWeather],
  })
  return { agent, calls }
}

/** What the tests read of a run, buffered or streamed. */
interface Ran {
  finalOutput?: unknown
  history: AgentInputItem[]
  state: { usage: Usage }
}

async function runAgent(
  runner: Runner,
  agent: Agent,
  input: string | AgentInputItem[],
  stream: boolean,
  options: { previousResponseId?: string } = {},
): Promise<Ran> {
  if (!stream) return runner.run(agent, input, options)
  const result = await runner.run(agent, input, { ...options, stream: true })
  let text = ''
  for await (const piece of result.toTextStream()) text += piece
  await result.completed
  // What streamed is the answer the run ended on.
  expect(text).toBe(result.finalOutput as string)
  return result
}

const itemTypes = (items: AgentInputItem[]) => items.map((item) => item.type)

interface RequestRecord {
  status: string
  complete: boolean
  costUsdc: string
  usage: { inputTokens: number; outputTokens: number }
  attempts: { outcome: string }[]
}

/**
 * Each model call of the run was one request, cleared once, billed for the tokens the SDK counted;
 * the account paid their sum, and holds nothing.
 */
async function expectBilledAsUsed(buyer: TestAccount, references: string[], result: Ran, spentBefore = 0) {
  const usage = result.state.usage
  expect(new Set(references).size).toBe(references.length)
  expect(references).toHaveLength(usage.requests)
  const entries = usage.requestUsageEntries ?? []
  expect(entries).toHaveLength(usage.requests)
  let billed = 0
  for (const [i, reference] of references.entries()) {
    const read = async () =>
      (await (await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)).json()) as RequestRecord
    await until(async () => (await read()).complete)
    const record = await read()
    expect(record.status).toBe('completed')
    expect(record.attempts.map((a) => a.outcome)).toEqual(['completed'])
    const { inputTokens, outputTokens } = entries[i]!
    expect(record.usage).toMatchObject({ inputTokens, outputTokens })
    const cost = parseMicros(record.costUsdc)!
    expect(cost).toBe(
      expectedCost({ prompt_tokens: inputTokens, completion_tokens: outputTokens }, ASK_CENTS),
    )
    billed += cost
  }
  const after = await balances(stack, buyer.accountId)
  expect(after.spent - spentBefore).toBe(billed)
  expect(after.held).toBe(0)
  expect(usage.inputTokens).toBe(entries.reduce((sum, e) => sum + e.inputTokens, 0))
  expect(usage.outputTokens).toBe(entries.reduce((sum, e) => sum + e.outputTokens, 0))
}

for (const api of ['responses', 'chat_completions'] as const) {
  describe(api, () => {
    for (const stream of [false, true]) {
      test(`a tool loop${stream ? ', streamed' : ''}: the SDK runs the tool, the answer ends the run, billed as used`, async () => {
        const { buyer, references, runner } = await agentRunner(api)
        const { agent, calls } = weatherAgent()
        const result = await runAgent(runner, agent, 'Weather in Paris?', stream)
        expect(calls).toEqual([{ city: 'market' }])
        expect((result.finalOutput as string).split(' ')).toHaveLength(5)
        expect(itemTypes(result.history)).toEqual([
          'message',
          'function_call',
          'function_call_result',
          'message',
        ])
        // The call the model made and the output the SDK sent back name the same call.
        const [, call, output] = result.history as { callId?: string }[]
        expect(output!.callId).toBe(call!.callId!)
        await expectBilledAsUsed(buyer, references, result)
      })
    }

    test('a second run given the first run’s history: the whole conversation is asked again', async () => {
      const { buyer, references, runner } = await agentRunner(api)
      const { agent, calls } = weatherAgent()
      const first = await runner.run(agent, 'Weather in Paris?')
      const { spent } = await balances(stack, buyer.accountId)
      const second = await runner.run(agent, [...first.history, user('And tomorrow?')])
      expect(calls).toHaveLength(2)
      expect(itemTypes(second.history)).toEqual([
        ...itemTypes(first.history),
        'message',
        'function_call',
        'function_call_result',
        'message',
      ])
      // The second run's first call carried all of the first run, so its prompt is the longer.
      const firstEntries = first.state.usage.requestUsageEntries!
      const secondEntries = second.state.usage.requestUsageEntries!
      expect(secondEntries[0]!.inputTokens).toBeGreaterThan(firstEntries.at(-1)!.inputTokens)
      expect(references).toHaveLength(4)
      await expectBilledAsUsed(buyer, references.slice(2), second, spent)
    })

    test('a handoff to an agent with a structured output: the second agent ends the run, parsed', async () => {
      const { runner } = await agentRunner(api)
      const city = Agent.create({
        name: 'city',
        instructions: 'Name a city.',
        model: 'llama-3.3-70b',
        outputType: z.object({ name: z.string(), population: z.number().int() }),
      })
      const triage = Agent.create({
        name: 'triage',
        instructions: 'Route.',
        model: 'llama-3.3-70b',
        handoffs: [city],
      })
      const result = await runner.run(triage, 'A city?')
      expect(result.lastAgent?.name).toBe('city')
      expect(result.finalOutput).toEqual({ name: 'market', population: 1 })
      expect(itemTypes(result.history)).toEqual([
        'message',
        'function_call',
        'function_call_result',
        'message',
      ])
    })
  })
}

describe('responses: conversation state on the server is refused, not silently dropped', () => {
  test('a reasoning model’s history (reasoning items included) goes back as the next run’s input', async () => {
    const { runner } = await agentRunner('responses')
    const { agent, calls } = weatherAgent('qwen3-4b', { reasoning: { effort: 'low' } })
    const first = await runner.run(agent, 'Weather in Paris?')
    expect(itemTypes(first.history)).toContain('reasoning')
    const second = await runner.run(agent, [...first.history, user('And tomorrow?')])
    expect(calls).toHaveLength(2)
    expect((second.finalOutput as string).split(' ')).toHaveLength(5)
    // The reasoning effort asked reached the supplier on every call.
    expect(second.state.usage.outputTokensDetails).toEqual([{ reasoning_tokens: 2 }, { reasoning_tokens: 2 }])
  })

  for (const stream of [false, true]) {
    test(`previousResponseId${stream ? ', streamed' : ''}: the tool's output sent without its call is a 400 naming it`, async () => {
      const { buyer, references, runner } = await agentRunner('responses')
      const { agent } = weatherAgent()
      const first = await runner.run(agent, 'Weather in Paris?')
      expect(first.lastResponseId).toStartWith('resp_')
      // The SDK sends only the new turn with the earlier response's id, which is accepted and, as
      // nothing is stored, answered as the turn alone; its tool loop then sends the tool's output
      // without the call it answers, which no supplier can place.
      const error = await runAgent(runner, agent, 'And tomorrow?', stream, {
        previousResponseId: first.lastResponseId!,
      }).then(
        () => null,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      const refused = error as InstanceType<typeof OpenAI.BadRequestError>
      expect(refused.message).toContain('function_call_output')
      expect(refused.message).toContain('send the call before its output')
      // The turn was answered and billed once; the refused output held and charged nothing.
      expect(references).toHaveLength(first.state.usage.requests + 1)
      expect((await balances(stack, buyer.accountId)).held).toBe(0)
    })
  }

  test('conversationId: a 400 naming conversation', async () => {
    const { runner } = await agentRunner('responses')
    const { agent } = weatherAgent()
    const error = await runner.run(agent, 'Weather?', { conversationId: 'conv_1' }).then(
      () => null,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((error as Error).message).toContain('conversation')
  })
})
