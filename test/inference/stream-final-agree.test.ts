// A stream's events and its final object say the same, and a buffered answer says it too, for one
// supplier output: each Responses item's status (an item whole before the answer was cut is
// completed, the one cut is incomplete) and each Messages tool_use input (the input_json_delta
// pieces put together are the input the buffered message gives); each Responses call's arguments
// (a whole object ends them, whatever the supplier sends after it); a failed Responses stream's
// output (only the items its events announced); and a chat completion's content, calls, finish
// reason and usage, streamed or not (read with openai-node's stream helper). The supplier is the test's own,
// answering a stream or a whole answer from the same scenario; read with the real SDKs.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { adminFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer } from '../helpers/buyers.ts'
import { type HostileSupplier, hostileSupplier, sseAnswer, wholeAnswer } from '../helpers/hostile-supplier.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

interface Call {
  id: string
  name: string
  /** Its arguments in the pieces the supplier streams them in. */
  pieces: string[]
}
interface Scenario {
  reasoning?: string
  text?: string
  calls: Call[]
  finish: 'length' | 'tool_calls' | 'stop'
  /** The stream ends here, without a finish or usage: the supplier's connection is cut. */
  truncated?: boolean
  /** More arguments for earlier calls, after all the calls have begun. */
  after?: { index: number; args: string }[]
  /** Text after all of that: the buffered answer has it as the message's content. */
  textAfter?: string
  /** The usage rides on the finish chunk, with the last text, not a chunk of its own. */
  usageOnFinish?: string
}

const USAGE = { prompt_tokens: 5, completion_tokens: 30, total_tokens: 35 }
const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-a', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}`

function streamOf(s: Scenario): string[] {
  const frames = [chunk({ role: 'assistant', content: '' })]
  if (s.reasoning) frames.push(chunk({ reasoning_content: s.reasoning }))
  if (s.text) frames.push(chunk({ content: s.text }))
  s.calls.forEach((call, index) => {
    call.pieces.forEach((args, i) => {
      const opens = i === 0 ? { id: call.id, type: 'function' } : {}
      const fn = i === 0 ? { name: call.name, arguments: args } : { arguments: args }
      frames.push(chunk({ tool_calls: [{ index, ...opens, function: fn }] }))
    })
  })
  for (const more of s.after ?? [])
    frames.push(chunk({ tool_calls: [{ index: more.index, function: { arguments: more.args } }] }))
  if (s.textAfter) frames.push(chunk({ content: s.textAfter }))
  if (s.truncated) return frames
  if (s.usageOnFinish !== undefined) {
    const last = JSON.parse(chunk({ content: s.usageOnFinish }, s.finish).slice(6))
    return [...frames, `data: ${JSON.stringify({ ...last, usage: USAGE })}`, 'data: [DONE]']
  }
  frames.push(chunk({}, s.finish))
  frames.push(
    `data: ${JSON.stringify({ id: 'chatcmpl-a', object: 'chat.completion.chunk', choices: [], usage: USAGE })}`,
  )
  return [...frames, 'data: [DONE]']
}

function wholeOf(s: Scenario): string {
  const toolCalls = s.calls.map((c, index) => ({
    id: c.id,
    type: 'function',
    function: {
      name: c.name,
      arguments: [...c.pieces, ...(s.after ?? []).filter((m) => m.index === index).map((m) => m.args)].join(
        '',
      ),
    },
  }))
  const message = {
    role: 'assistant',
    content: (s.text ?? '') + (s.textAfter ?? '') + (s.usageOnFinish ?? '') || null,
    ...(s.reasoning ? { reasoning_content: s.reasoning } : {}),
    ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
  }
  return JSON.stringify({
    id: 'chatcmpl-a',
    object: 'chat.completion',
    choices: [{ index: 0, message, finish_reason: s.finish }],
    usage: USAGE,
  })
}

let stack: TestStack
let hostile: HostileSupplier
let buyer: TestAccount
let scenario: Scenario

beforeAll(async () => {
  hostile = hostileSupplier((call) =>
    (JSON.parse(call.body) as { stream?: boolean }).stream
      ? sseAnswer(streamOf(scenario))
      : wholeAnswer(200, wholeOf(scenario)),
  )
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

// biome-ignore lint/suspicious/noExplicitAny: the tests read the SDKs' objects by path
type Json = Record<string, any>

/** What an output item says, apart from ids that differ between two requests. */
const said = (item: Json) => ({
  type: item.type,
  status: item.status,
  ...(item.type === 'function_call' ? { call_id: item.call_id, arguments: item.arguments } : {}),
  ...(item.type === 'message' ? { text: item.content.map((p: Json) => p.text).join('') } : {}),
  ...(item.type === 'reasoning' ? { text: item.content.map((p: Json) => p.text).join('') } : {}),
})

const RESPONSES: Record<string, [Scenario, string[]]> = {
  'cut at the limit in the second call, the first whole': [
    {
      text: 'Checking.',
      calls: [
        { id: 'call_a', name: 'f', pieces: ['{"a":', '1}'] },
        { id: 'call_b', name: 'f', pieces: ['{"b":', '"x'] },
      ],
      finish: 'length',
    },
    ['completed', 'completed', 'incomplete'],
  ],
  'cut at the limit in the message, after reasoning': [
    { reasoning: 'weighing it', text: 'The answer is', calls: [], finish: 'length' },
    ['completed', 'incomplete'],
  ],
  'cut at the limit with the first call never whole': [
    {
      calls: [
        { id: 'call_a', name: 'f', pieces: ['{"a":'] },
        { id: 'call_b', name: 'f', pieces: ['{"b":2}'] },
      ],
      finish: 'length',
    },
    ['incomplete', 'incomplete'],
  ],
}

const openai = () => new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
const responsesParams = {
  model: 'llama-3.3-70b',
  input: 'hi',
  tools: [{ type: 'function' as const, name: 'f', parameters: { type: 'object' }, strict: false }],
}

async function streamedResponse() {
  const events: Json[] = []
  const stream = openai().responses.stream(responsesParams)
  stream.on('event', (event) => events.push(event))
  const final = (await stream.finalResponse()) as Json
  await settled()
  const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item)
  const last = events.at(-1)!
  return { final, done, last }
}

describe('/v1/responses: item statuses', () => {
  for (const [name, [s, statuses]] of Object.entries(RESPONSES)) {
    test(`${name}: the item events, the final response and the buffered answer agree`, async () => {
      scenario = s
      const { final, done, last } = await streamedResponse()
      expect(final.status).toBe('incomplete')
      expect(last.type).toBe('response.incomplete')
      expect(done.map((item) => item.status)).toEqual(statuses)
      expect(last.response.output.map(said)).toEqual(done.map(said))
      expect(final.output.map(said)).toEqual(done.map(said))

      const whole = (await openai().responses.create(responsesParams)) as Json
      await settled()
      expect(whole.status).toBe('incomplete')
      expect(whole.output.map(said)).toEqual(done.map(said))
    })
  }

  test('a supplier stream cut after a whole call: that call completed, the one cut incomplete, in the events and the final object', async () => {
    scenario = {
      calls: [
        { id: 'call_a', name: 'f', pieces: ['{"a":1}'] },
        { id: 'call_b', name: 'f', pieces: ['{"b":'] },
      ],
      finish: 'tool_calls',
      truncated: true,
    }
    const { final, done, last } = await streamedResponse()
    expect(last.type).toBe('response.incomplete')
    expect(last.response.incomplete_details).toEqual({ reason: 'stream_incomplete' })
    expect(done.map((item) => item.status)).toEqual(['completed', 'incomplete'])
    expect(last.response.output.map(said)).toEqual(done.map(said))
    expect(final.output.map(said)).toEqual(done.map(said))
  })
})

const MESSAGES: Record<string, [Scenario, Record<string, unknown>]> = {
  'arguments that begin an object and then turn invalid': [
    {
      calls: [{ id: 'call_a', name: 'f', pieces: ['{"city":"Paris",', '"days":3,}'] }],
      finish: 'tool_calls',
    },
    { city: 'Paris', days: 3 },
  ],
  'arguments that turn invalid inside an array': [
    { calls: [{ id: 'call_a', name: 'f', pieces: ['{"a":[1,2', 'x]}'] }], finish: 'tool_calls' },
    { a: [1, 2] },
  ],
  'arguments cut at the limit inside a string': [
    {
      calls: [{ id: 'call_a', name: 'f', pieces: ['{"path":"a.txt","body":"hel', 'lo wor'] }],
      finish: 'length',
    },
    { path: 'a.txt', body: 'hello wor' },
  ],
  'arguments cut at the limit inside a key': [
    { calls: [{ id: 'call_a', name: 'f', pieces: ['{"n":-1.5e', '3,"ke'] }], finish: 'length' },
    { n: -1500 },
  ],
  'a whole call, then more of it that is no JSON': [
    {
      calls: [
        { id: 'call_a', name: 'f', pieces: ['{"a":1}'] },
        { id: 'call_b', name: 'f', pieces: ['{"b":2}'] },
      ],
      finish: 'tool_calls',
      after: [{ index: 0, args: ' x' }],
    },
    { a: 1 },
  ],
}

const anthropic = () => new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
const messagesParams = {
  model: 'llama-3.3-70b',
  max_tokens: 256,
  tools: [{ name: 'f', input_schema: { type: 'object' as const } }],
  messages: [{ role: 'user' as const, content: 'hi' }],
}

describe('/v1/messages: tool_use input', () => {
  for (const [name, [s, input]] of Object.entries(MESSAGES)) {
    test(`${name}: the streamed pieces, the final message and the buffered answer give one input`, async () => {
      scenario = s
      const json = new Map<number, string>()
      const stream = anthropic().messages.stream(messagesParams)
      stream.on('streamEvent', (event: Json) => {
        if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta')
          json.set(event.index, (json.get(event.index) ?? '') + event.delta.partial_json)
      })
      const final = (await stream.finalMessage()) as Json
      await settled()
      // Anthropic's pieces put together are the input's JSON text.
      expect(JSON.parse(json.get(0)!)).toEqual(input)
      expect(final.content[0].input).toEqual(input)

      const whole = (await anthropic().messages.create(messagesParams)) as Json
      await settled()
      expect(whole.content[0].input).toEqual(input)
      expect(whole.content.map((b: Json) => b.input)).toEqual(final.content.map((b: Json) => b.input))
      expect(whole.stop_reason).toBe(final.stop_reason)
    })
  }
})

const ARGUMENTS: Record<string, [Scenario, string[]]> = {
  'a whole call, then more of it that is no JSON after the next call began': [
    {
      calls: [
        { id: 'call_a', name: 'f', pieces: ['{"a":1}'] },
        { id: 'call_b', name: 'f', pieces: ['{"b":2}'] },
      ],
      finish: 'tool_calls',
      after: [{ index: 0, args: ' x' }],
    },
    ['{"a":1}', '{"b":2}'],
  ],
  'a whole call, then more of it that is no JSON before the next call began': [
    {
      calls: [
        { id: 'call_a', name: 'f', pieces: ['{"a":1}', '\n x}'] },
        { id: 'call_b', name: 'f', pieces: ['{"b":2}'] },
      ],
      finish: 'tool_calls',
    },
    ['{"a":1}', '{"b":2}'],
  ],
  'the last call whole, then more of it': [
    { calls: [{ id: 'call_a', name: 'f', pieces: ['{"a":1}', '{"a":2}'] }], finish: 'tool_calls' },
    ['{"a":1}'],
  ],
}

describe('/v1/responses: function call arguments', () => {
  for (const [name, [s, args]] of Object.entries(ARGUMENTS)) {
    test(`${name}: the deltas, the item events, the final response and the buffered answer give one text`, async () => {
      scenario = s
      const deltas = new Map<number, string>()
      const events: Json[] = []
      const stream = openai().responses.stream(responsesParams)
      stream.on('event', (event: Json) => {
        events.push(event)
        if (event.type === 'response.function_call_arguments.delta')
          deltas.set(event.output_index, (deltas.get(event.output_index) ?? '') + event.delta)
      })
      const final = (await stream.finalResponse()) as Json
      await settled()
      const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item)
      const argsDone = events.filter((e) => e.type === 'response.function_call_arguments.done')
      expect(done.map((item) => item.arguments)).toEqual(args)
      expect(done.map((item) => item.status)).toEqual(args.map(() => 'completed'))
      expect([...deltas.values()]).toEqual(args)
      expect(argsDone.map((e) => e.arguments)).toEqual(args)
      expect(final.output.map(said)).toEqual(done.map(said))

      const whole = (await openai().responses.create(responsesParams)) as Json
      await settled()
      expect(whole.status).toBe('completed')
      expect(whole.output.map(said)).toEqual(done.map(said))
    })
  }
})

describe('/v1/responses: an answer that failed', () => {
  test('response.failed lists only the items the events announced', async () => {
    // A call with an id and nothing else: never announced (it has no name), and no text, no usage:
    // nothing was delivered, the hold is released and the answer fails.
    scenario = { calls: [{ id: 'call_a', name: '', pieces: [''] }], finish: 'tool_calls', truncated: true }
    const events: Json[] = []
    const stream = openai().responses.stream(responsesParams)
    stream.on('event', (event: Json) => events.push(event))
    await stream.finalResponse().catch(() => null)
    await settled()
    const failed = events.find((e) => e.type === 'response.failed')
    expect(failed).toBeDefined()
    const added = events.filter((e) => e.type === 'response.output_item.added').map((e) => e.item.id)
    expect(failed!.response.output.map((item: Json) => item.id)).toEqual(added)
  })
})

const CHAT: Record<string, Scenario> = {
  'text, then two calls': {
    text: 'Checking.',
    calls: [
      { id: 'call_a', name: 'f', pieces: ['{"a":', '1}'] },
      { id: 'call_b', name: 'f', pieces: ['{"b":2}'] },
    ],
    finish: 'tool_calls',
  },
  'arguments cut at the limit': {
    calls: [{ id: 'call_a', name: 'f', pieces: ['{"path":"a.txt","body":"hel', 'lo wor'] }],
    finish: 'length',
  },
  'arguments that turn invalid, and more of a whole call after the next began': {
    calls: [
      { id: 'call_a', name: 'f', pieces: ['{"a":1}'] },
      { id: 'call_b', name: 'f', pieces: ['{"b":[1,', 'x]}'] },
    ],
    finish: 'tool_calls',
    after: [{ index: 0, args: ' x' }],
  },
  'text only, cut at the limit': { text: 'The answer is', calls: [], finish: 'length' },
  'usage on the finish chunk, with the last text': {
    text: 'Done',
    calls: [],
    finish: 'stop',
    usageOnFinish: '.',
  },
}

const chatParams = {
  model: 'llama-3.3-70b',
  messages: [{ role: 'user' as const, content: 'hi' }],
  tools: [{ type: 'function' as const, function: { name: 'f', parameters: { type: 'object' } } }],
}

/** What a chat choice says, apart from ids that differ between two requests. */
const chatSaid = (completion: Json) => ({
  choices: completion.choices.map((c: Json) => ({
    finish_reason: c.finish_reason,
    // No text either way: the supplier's stream opens with an empty content, its whole answer a null.
    content: c.message.content || null,
    tool_calls: (c.message.tool_calls ?? []).map((t: Json) => ({
      id: t.id,
      type: t.type,
      name: t.function.name,
      arguments: t.function.arguments,
    })),
  })),
  usage: completion.usage,
})

describe('/v1/chat/completions: streamed and buffered', () => {
  for (const [name, s] of Object.entries(CHAT)) {
    test(`${name}: the streamed completion and the buffered one say the same`, async () => {
      scenario = s
      const streamed = (await openai().chat.completions.stream(chatParams).finalChatCompletion()) as Json
      await settled()
      const whole = (await openai().chat.completions.create(chatParams)) as Json
      await settled()
      expect(chatSaid(streamed)).toEqual(chatSaid(whole))
      expect(whole.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 30, total_tokens: 35 })
    })
  }
})

test('/v1/chat/completions: usage beyond what the request allows is shown as billed, streamed or buffered', async () => {
  scenario = { text: 'The answer is', calls: [], finish: 'length' }
  const params = { ...chatParams, max_tokens: 10 }
  const streamed = (await openai().chat.completions.stream(params).finalChatCompletion()) as Json
  await settled()
  const whole = (await openai().chat.completions.create(params)) as Json
  await settled()
  expect(whole.usage.completion_tokens).toBe(10)
  expect(chatSaid(streamed)).toEqual(chatSaid(whole))
})
