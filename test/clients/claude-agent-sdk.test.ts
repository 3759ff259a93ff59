// Anthropic's Claude Agent SDK (@anthropic-ai/claude-agent-sdk, which runs Claude Code's own
// binary) against POST /v1/messages: a one-turn answer and a tool loop through an in-process MCP
// tool, each request as Claude Code sends it (a system message inside `messages`, adaptive
// thinking, effort, context_management, cache_control, its anthropic-beta list), with the usage
// the SDK reports equal to what the gateway billed. The reasoning model, as Claude Code always
// asks for thinking and effort; no built-in tool, so nothing outside the temp folders is touched.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  createSdkMcpServer,
  type Options,
  query,
  type SDKMessage,
  type SDKResultMessage,
  tool,
} from '@anthropic-ai/claude-agent-sdk'
import { z } from 'zod'
import { parseMicros } from '../../src/money/units.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

const MODEL = 'svc/qwen3-4b'
/** The simulated qwen3-4b's list prices, micro-USD per million tokens. */
const QWEN_PRICES = { input: 50_000, output: 150_000 }
const FUNDED = '10.000000'

let stack: TestStack
let home: string

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 5 } })
  await simOffer(stack, 40)
  home = mkdtempSync(join(tmpdir(), 'claude-agent-home-'))
})
afterAll(async () => {
  await stack.stop()
  rmSync(home, { recursive: true, force: true })
})

/** Claude Code pointed at the gateway only: every other call it could make is switched off. */
function agentOptions(buyer: TestAccount, extra: Partial<Options> = {}): Options {
  return {
    cwd: mkdtempSync(join(home, 'cwd-')),
    model: MODEL,
    tools: [],
    permissionMode: 'dontAsk',
    settingSources: [],
    persistSession: false,
    maxTurns: 3,
    env: {
      PATH: process.env.PATH,
      HOME: home,
      CLAUDE_CONFIG_DIR: join(home, '.claude'),
      ANTHROPIC_BASE_URL: stack.url,
      ANTHROPIC_API_KEY: buyer.apiKey,
      // Its default of 32,000 is past the model's limit (4,096), which the gateway refuses.
      CLAUDE_CODE_MAX_OUTPUT_TOKENS: '4096',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
    },
    ...extra,
  }
}

async function run(prompt: string, options: Options) {
  const messages: SDKMessage[] = []
  for await (const message of query({ prompt, options })) messages.push(message)
  const result = messages.find((m): m is SDKResultMessage => m.type === 'result')
  return { messages, result: result! }
}

interface Attempt {
  status: string
  costUsdc: string
  inputTokens: number
  outputTokens: number
}

/** The buyer's ended attempts as the gateway recorded and billed them. */
async function attempts(buyer: TestAccount): Promise<Attempt[]> {
  const response = await keyFetch(stack, buyer.apiKey, '/v1/agent/activity')
  expect(response.status).toBe(200)
  return ((await response.json()) as { data: Attempt[] }).data
}

/** Every attempt completed, their tokens the SDK's usage, their costs the balance's drop. */
async function expectBilledAsReported(buyer: TestAccount, result: SDKResultMessage, requests: number) {
  const billed = await attempts(buyer)
  expect(billed.map((a) => a.status)).toEqual(Array(requests).fill('completed'))
  const sum = (pick: (a: Attempt) => number) => billed.reduce((total, a) => total + pick(a), 0)
  expect(result.usage.input_tokens).toBe(sum((a) => a.inputTokens))
  expect(result.usage.output_tokens).toBe(sum((a) => a.outputTokens))
  expect(result.usage.cache_read_input_tokens).toBe(0)
  const costs = billed.map((a) =>
    expectedCost({ prompt_tokens: a.inputTokens, completion_tokens: a.outputTokens }, 40, QWEN_PRICES),
  )
  expect(billed.map((a) => parseMicros(a.costUsdc))).toEqual(costs)
  const after = await balances(stack, buyer.accountId)
  expect(after.held).toBe(0)
  expect(parseMicros(FUNDED)! - after.confirmed).toBe(costs.reduce((total, cost) => total + cost, 0))
}

test('query: a one-turn answer through the gateway, with thinking, billed as the SDK reports', async () => {
  const buyer = await fundedBuyer(stack, FUNDED)
  const { messages, result } = await run('Say hello.', agentOptions(buyer, { maxTurns: 1 }))
  expect(result.subtype).toBe('success')
  expect(result.is_error).toBe(false)
  if (result.subtype !== 'success') return
  expect(result.result).toBe('the market clears at the')
  expect(result.stop_reason).toBe('end_turn')
  expect(result.num_turns).toBe(1)
  const blocks = messages.flatMap((m) => (m.type === 'assistant' ? m.message.content : []))
  expect(blocks.map((b) => b.type)).toEqual(['thinking', 'text'])
  // Reasoning (8 tokens at the default effort) and the 5 words are the output billed.
  expect(result.usage.output_tokens).toBe(13)
  await expectBilledAsReported(buyer, result, 1)
})

test("Claude Code's effort setting max (or xhigh) is the supplier's highest effort, not a 400", async () => {
  const buyer = await fundedBuyer(stack, FUNDED)
  const options = agentOptions(buyer, { maxTurns: 1 })
  options.env = { ...options.env, CLAUDE_CODE_EFFORT_LEVEL: 'max' }
  const { result } = await run('Say hello.', options)
  expect(result.is_error).toBe(false)
  expect(result.subtype).toBe('success')
  // High effort's 8 reasoning tokens and the 5 words.
  expect(result.usage.output_tokens).toBe(13)
  await expectBilledAsReported(buyer, result, 1)
})

test('a tool loop: the model calls an MCP tool, gets its result, then answers', async () => {
  const buyer = await fundedBuyer(stack, FUNDED)
  const calls: { city: string }[] = []
  const weather = tool('get_weather', 'The weather in a city', { city: z.string() }, async (input) => {
    calls.push(input)
    return { content: [{ type: 'text', text: 'sunny' }] }
  })
  const options = agentOptions(buyer, {
    mcpServers: { weather: createSdkMcpServer({ name: 'weather', tools: [weather] }) },
    allowedTools: ['mcp__weather__get_weather'],
  })
  const { messages, result } = await run('Weather in Paris?', options)
  expect(calls).toEqual([{ city: 'market' }])
  const toolResults = messages.flatMap((m) =>
    m.type === 'user' && Array.isArray(m.message.content) ? m.message.content : [],
  )
  expect(toolResults).toMatchObject([{ type: 'tool_result', content: [{ type: 'text', text: 'sunny' }] }])
  expect(result.subtype).toBe('success')
  if (result.subtype !== 'success') return
  expect(result.result).toBe('the market clears at the')
  expect(result.num_turns).toBe(2)
  await expectBilledAsReported(buyer, result, 2)
})
