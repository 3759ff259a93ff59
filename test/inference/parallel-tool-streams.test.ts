// Tool calls streamed as suppliers really send them, through the Responses and Messages facades:
// parallel calls interleaved (pieces of call 0 after call 1 opened), an id and name that come after
// the first arguments, a call with no arguments, text between the calls, twenty calls at once,
// arguments cut mid-escape and mid-character. Read with the real SDKs: every call's arguments are
// all the supplier sent, the events are well ordered (one item or block open at a time, each delta
// inside its own), and the buffered route gives the same calls.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { TestAccount } from '../helpers/accounts.ts'
import { adminFetch } from '../helpers/accounts.ts'
import { balances, fundedBuyer } from '../helpers/buyers.ts'
import { type HostileSupplier, hostileSupplier, sseAnswer, wholeAnswer } from '../helpers/hostile-supplier.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

interface Call {
  id: string
  name: string
  args: string
}
interface Scenario {
  /** The supplier's stream, as chat deltas. */
  deltas: Record<string, unknown>[]
  /** What it sent in all: the buffered answer's text and calls. */
  text: string
  calls: Call[]
  /**
   * The streamed message's blocks (text, or a call's id) where text came after a call had begun:
   * its own block after the call, as it came; the buffered answer has all its text in one block.
   */
  streamedBlocks?: string[]
}

// One delta naming tool calls by their index; `id`/`name` only where given.
const piece = (index: number, p: { id?: string; name?: string; args?: string }) => ({
  index,
  ...(p.id ? { id: p.id, type: 'function' } : {}),
  function: { ...(p.name ? { name: p.name } : {}), ...(p.args !== undefined ? { arguments: p.args } : {}) },
})
const calls = (...pieces: Record<string, unknown>[]) => ({ tool_calls: pieces })

const twenty = Array.from({ length: 20 }, (_, i) => ({
  id: `call_${i}`,
  name: `tool_${i}`,
  args: JSON.stringify({ n: i, word: `w${i}`.repeat(3) }),
}))
const thirds = (s: string) => [s.slice(0, 3), s.slice(3, 9), s.slice(9)]
const tricky = '{"q":"a\\"b 😀 ü"}'
const cutAt = [tricky.indexOf('\\') + 1, tricky.indexOf('😀') + 1]

const SCENARIOS: Record<string, Scenario> = {
  'two calls interleaved': {
    deltas: [
      calls(piece(0, { id: 'call_a', name: 'get_weather', args: '' })),
      calls(piece(0, { args: '{"city":' })),
      calls(piece(1, { id: 'call_b', name: 'get_time', args: '{"tz":' })),
      calls(piece(0, { args: '"Paris"}' })),
      calls(piece(1, { args: '"CET"}' })),
    ],
    text: '',
    calls: [
      { id: 'call_a', name: 'get_weather', args: '{"city":"Paris"}' },
      { id: 'call_b', name: 'get_time', args: '{"tz":"CET"}' },
    ],
  },
  'pieces of two calls in one chunk': {
    deltas: [
      calls(
        piece(0, { id: 'call_a', name: 'get_weather', args: '{"ci' }),
        piece(1, { id: 'call_b', name: 'get_time' }),
      ),
      calls(piece(1, { args: '{"tz":"CET"}' }), piece(0, { args: 'ty":"Oslo"}' })),
    ],
    text: '',
    calls: [
      { id: 'call_a', name: 'get_weather', args: '{"city":"Oslo"}' },
      { id: 'call_b', name: 'get_time', args: '{"tz":"CET"}' },
    ],
  },
  'id and name after the first arguments': {
    deltas: [
      calls(piece(0, { args: '{"q":' })),
      calls(piece(0, { id: 'call_l', name: 'lookup' })),
      calls(piece(0, { args: '"x"}' })),
    ],
    text: '',
    calls: [{ id: 'call_l', name: 'lookup', args: '{"q":"x"}' }],
  },
  'calls without an index, each whole in its chunk': {
    deltas: [
      calls({
        id: 'call_a',
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
      }),
      calls({ id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{"tz":"CET"}' } }),
    ],
    text: '',
    calls: [
      { id: 'call_a', name: 'get_weather', args: '{"city":"Paris"}' },
      { id: 'call_b', name: 'get_time', args: '{"tz":"CET"}' },
    ],
  },
  'a call with no arguments': {
    deltas: [
      calls(piece(0, { id: 'call_e', name: 'now', args: '' })),
      calls(piece(1, { id: 'call_f', name: 'get_time', args: '{"tz":"UTC"}' })),
    ],
    text: '',
    calls: [
      { id: 'call_e', name: 'now', args: '' },
      { id: 'call_f', name: 'get_time', args: '{"tz":"UTC"}' },
    ],
  },
  'text between the calls': {
    deltas: [
      { content: 'Let me ' },
      calls(piece(0, { id: 'call_a', name: 'get_weather', args: '{"city":' })),
      { content: 'check.' },
      calls(piece(0, { args: '"Rome"}' })),
    ],
    text: 'Let me check.',
    calls: [{ id: 'call_a', name: 'get_weather', args: '{"city":"Rome"}' }],
    streamedBlocks: ['Let me ', 'call_a', 'check.'],
  },
  'twenty calls at once': {
    deltas: [0, 1, 2].flatMap((round) =>
      twenty.map((c, i) =>
        calls(
          piece(
            i,
            round === 0
              ? { id: c.id, name: c.name, args: thirds(c.args)[0] }
              : { args: thirds(c.args)[round] },
          ),
        ),
      ),
    ),
    text: '',
    calls: twenty,
  },
  'arguments cut mid-escape and mid-character': {
    deltas: [
      calls(piece(0, { id: 'call_a', name: 'search', args: tricky.slice(0, cutAt[0]) })),
      calls(piece(1, { id: 'call_b', name: 'search', args: tricky.slice(0, cutAt[1]) })),
      calls(piece(0, { args: tricky.slice(cutAt[0]) })),
      calls(piece(1, { args: tricky.slice(cutAt[1]) })),
    ],
    text: '',
    calls: [
      { id: 'call_a', name: 'search', args: tricky },
      { id: 'call_b', name: 'search', args: tricky },
    ],
  },
}

const USAGE = { prompt_tokens: 5, completion_tokens: 40, total_tokens: 45 }
const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-p', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}`

let stack: TestStack
let hostile: HostileSupplier
let buyer: TestAccount
let scenario: Scenario

beforeAll(async () => {
  hostile = hostileSupplier((call) => {
    if ((JSON.parse(call.body) as { stream?: boolean }).stream) {
      return sseAnswer([
        chunk({ role: 'assistant', content: '' }),
        ...scenario.deltas.map((delta) => chunk(delta)),
        chunk({}, 'tool_calls'),
        `data: ${JSON.stringify({ id: 'chatcmpl-p', object: 'chat.completion.chunk', choices: [], usage: USAGE })}`,
        'data: [DONE]',
      ])
    }
    const toolCalls = scenario.calls.map((c) => ({
      id: c.id,
      type: 'function',
      function: { name: c.name, arguments: c.args },
    }))
    const message = { role: 'assistant', content: scenario.text || null, tool_calls: toolCalls }
    return wholeAnswer(
      200,
      JSON.stringify({
        id: 'chatcmpl-p',
        object: 'chat.completion',
        choices: [{ index: 0, message, finish_reason: 'tool_calls' }],
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

// biome-ignore lint/suspicious/noExplicitAny: the tests read the SDKs' objects by path
type Json = Record<string, any>

const responsesCalls = (output: Json[]) =>
  output
    .filter((item) => item.type === 'function_call')
    .map((item) => ({ id: item.call_id, name: item.name, args: item.arguments }))
const responsesText = (output: Json[]) =>
  output
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content.map((part: Json) => part.text ?? ''))
    .join('')

/** Each item opened, filled and closed before the next opens; every call's deltas add up to it. */
function expectResponsesOrder(events: Json[]) {
  let open: string | null = null
  const deltas = new Map<string, string>()
  for (const event of events) {
    if (event.type === 'response.output_item.added') {
      expect(open).toBeNull()
      open = event.item.id
    } else if (event.type === 'response.output_item.done') {
      expect(event.item.id).toBe(open!)
      if (event.item.type === 'function_call') expect(event.item.arguments).toBe(deltas.get(open!) ?? '')
      open = null
    } else if (typeof event.item_id === 'string') {
      expect(event.item_id).toBe(open!)
      if (event.type === 'response.function_call_arguments.delta')
        deltas.set(open!, (deltas.get(open!) ?? '') + event.delta)
      if (event.type === 'response.function_call_arguments.done')
        expect(event.arguments).toBe(deltas.get(open!) ?? '')
    }
  }
  expect(open).toBeNull()
}

const messagesCalls = (content: Json[]) =>
  content
    .filter((block) => block.type === 'tool_use')
    .map((b) => ({ id: b.id, name: b.name, input: b.input }))
const messagesText = (content: Json[]) =>
  content
    .filter((block) => block.type === 'text')
    .map((b) => b.text)
    .join('')
const inputs = (list: Call[]) =>
  list.map((c) => ({ id: c.id, name: c.name, input: c.args ? JSON.parse(c.args) : {} }))

/** One block open at a time, each delta inside the block it names, the indexes in order. */
function expectMessagesOrder(events: Json[]) {
  let open: number | null = null
  let next = 0
  for (const event of events) {
    if (event.type === 'content_block_start') {
      expect(open).toBeNull()
      expect(event.index).toBe(next++)
      open = event.index
    } else if (event.type === 'content_block_delta') {
      expect(event.index).toBe(open!)
    } else if (event.type === 'content_block_stop') {
      expect(event.index).toBe(open!)
      open = null
    }
  }
  expect(open).toBeNull()
}

const openai = () => new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
const anthropic = () => new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
const toolsFor = (list: Call[]) => [...new Set(list.map((c) => c.name))]

for (const [name, s] of Object.entries(SCENARIOS)) {
  describe(name, () => {
    test('/v1/responses: streamed calls whole and well ordered, as the buffered answer gives them', async () => {
      scenario = s
      const tools = toolsFor(s.calls).map((n) => ({
        type: 'function' as const,
        name: n,
        parameters: { type: 'object' },
        strict: false,
      }))
      const params = { model: 'llama-3.3-70b', input: 'hi', tools }
      const events: Json[] = []
      const stream = openai().responses.stream(params)
      stream.on('event', (event) => events.push(event))
      const final = await stream.finalResponse()
      await settled()
      expect(final.status).toBe('completed')
      expect(responsesCalls(final.output)).toEqual(s.calls)
      expect(responsesText(final.output)).toBe(s.text)
      expectResponsesOrder(events)
      const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item)
      expect(responsesCalls(done)).toEqual(s.calls)

      const whole = await openai().responses.create(params)
      await settled()
      expect(responsesCalls(whole.output)).toEqual(s.calls)
      expect(responsesText(whole.output)).toBe(s.text)
    })

    test('/v1/messages: every tool_use block whole and in one block, as the buffered answer gives it', async () => {
      scenario = s
      const tools = toolsFor(s.calls).map((n) => ({ name: n, input_schema: { type: 'object' as const } }))
      const params = {
        model: 'llama-3.3-70b',
        max_tokens: 256,
        tools,
        messages: [{ role: 'user' as const, content: 'hi' }],
      }
      const events: Json[] = []
      const stream = anthropic().messages.stream(params)
      stream.on('streamEvent', (event) => events.push(event))
      const final = await stream.finalMessage()
      await settled()
      expect(messagesCalls(final.content)).toEqual(inputs(s.calls))
      expect(messagesText(final.content)).toBe(s.text)
      expect(final.stop_reason).toBe('tool_use')
      expectMessagesOrder(events)

      const whole = await anthropic().messages.create(params)
      await settled()
      if (s.streamedBlocks) {
        expect(final.content.map((b: Json) => (b.type === 'text' ? b.text : b.id))).toEqual(s.streamedBlocks)
        expect(messagesCalls(whole.content)).toEqual(messagesCalls(final.content))
        expect(messagesText(whole.content)).toBe(s.text)
      } else expect(whole.content as unknown[]).toEqual(final.content as unknown[])
      expect(whole.stop_reason).toBe('tool_use')
    })
  })
}
