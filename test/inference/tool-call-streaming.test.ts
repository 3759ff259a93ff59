// Tool calls reach a Responses or Messages client as the supplier streams them: each call's item or
// block opens when the call starts and its arguments come as deltas while the supplier is still
// generating, not in one lump at the end. The supplier here holds its stream at two gates the test
// releases only once it has read the pieces sent so far: text, then two parallel calls (call 1
// opened while call 0's arguments are unfinished), their arguments in several fragments. Read with
// the official SDKs; the calls put together equal the supplier's, and the charge is its usage's.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { formatMicros } from '../../src/money/units.ts'
import { adminFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const USAGE = { prompt_tokens: 12, completion_tokens: 30, total_tokens: 42 }
const ASK_CENTS = 50
const TEXT = 'Checking both.'
const CALLS = [
  { id: 'call_w', name: 'get_weather', args: '{"city":"Paris"}' },
  { id: 'call_t', name: 'get_time', args: '{"tz":"CET"}' },
]

const frame = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-g', object: 'chat.completion.chunk', model: 'llama-3.3-70b', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
const piece = (index: number, args: string, opens = false) => ({
  tool_calls: [
    {
      index,
      ...(opens ? { id: CALLS[index]!.id, type: 'function' } : {}),
      function: { ...(opens ? { name: CALLS[index]!.name } : {}), arguments: args },
    },
  ],
})

/** One gate of the supplier's stream: released by the test, or (so a failing test ends) on its own. */
class Gate {
  released: 'test' | 'timeout' | null = null
  private open!: () => void
  readonly passed = new Promise<void>((resolve) => {
    this.open = resolve
  })
  release(by: 'test' | 'timeout' = 'test') {
    this.released ??= by
    this.open()
  }
  /** Waits for the test; a test whose events never came ends anyway, its gate marked 'timeout'. */
  wait() {
    const timer = setTimeout(() => this.release('timeout'), 4000)
    return this.passed.finally(() => clearTimeout(timer))
  }
}

let gates: [Gate, Gate]
let server: ReturnType<typeof Bun.serve>
let stack: TestStack
let buyer: TestAccount

beforeAll(async () => {
  server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch() {
      const [first, second] = gates
      const encoder = new TextEncoder()
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          const send = (...frames: string[]) => controller.enqueue(encoder.encode(frames.join('')))
          send(
            frame({ role: 'assistant', content: '' }),
            frame({ content: 'Checking ' }),
            frame({ content: 'both.' }),
            frame(piece(0, '', true)),
            frame(piece(0, '{"city":"Pa')),
          )
          await first.wait()
          send(frame(piece(1, '{"tz"', true)), frame(piece(0, 'ris"}')), frame(piece(1, ':"CET"')))
          await second.wait()
          send(
            frame(piece(1, '}')),
            frame({}, 'tool_calls'),
            `data: ${JSON.stringify({ id: 'chatcmpl-g', object: 'chat.completion.chunk', choices: [], usage: USAGE })}\n\n`,
            'data: [DONE]\n\n',
          )
          controller.close()
        },
      })
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  stack = await startStack({ env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: {
      upstreamBaseUrl: `http://127.0.0.1:${server.port}`,
      upstreamApiKey: 'gated-key',
      askCents: ASK_CENTS,
      capacityDiem: '50',
    },
  })
  expect(offer.status).toBe(201)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  server.stop(true)
})

const settled = () => until(async () => (await balances(stack, buyer.accountId)).held === 0)
const charge = async (run: () => Promise<string>) => {
  const before = (await balances(stack, buyer.accountId)).confirmed
  const costUsdc = await run()
  await settled()
  const charged = before - (await balances(stack, buyer.accountId)).confirmed
  expect(costUsdc).toBe(formatMicros(charged))
  expect(charged).toBe(expectedCost(USAGE, ASK_CENTS))
}

// biome-ignore lint/suspicious/noExplicitAny: the test reads the SDKs' events by path
type Json = Record<string, any>

describe('tool calls stream as the supplier sends them', () => {
  test('/v1/responses: each call opens when it starts, its arguments arrive as deltas', async () => {
    gates = [new Gate(), new Gate()]
    const client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
    const tools = CALLS.map((c) => ({
      type: 'function' as const,
      name: c.name,
      parameters: { type: 'object' },
      strict: false,
    }))
    const args = new Map<number, string>()
    const added: Json[] = []
    let completed: Json | null = null
    await charge(async () => {
      const stream = client.responses.stream({ model: 'llama-3.3-70b', input: 'weather and time?', tools })
      for await (const event of stream as AsyncIterable<Json>) {
        if (event.type === 'response.output_item.added') added.push(event)
        if (event.type === 'response.function_call_arguments.delta')
          args.set(event.output_index, (args.get(event.output_index) ?? '') + event.delta)
        if (event.type === 'response.completed') completed = event
        // Call 0 is on the wire with its first fragment while the supplier holds the rest.
        if (args.get(1) === '{"city":"Pa') gates[0].release()
        // Call 1 too, opened and filled as far as the supplier has gone, before its last fragment.
        if (args.get(2) === '{"tz":"CET"') gates[1].release()
      }
      return completed!.costUsdc
    })
    expect(gates.map((g) => g.released)).toEqual(['test', 'test'])
    expect(added.map((e) => [e.output_index, e.item.type, e.item.call_id, e.item.name])).toEqual([
      [0, 'message', undefined, undefined],
      [1, 'function_call', 'call_w', 'get_weather'],
      [2, 'function_call', 'call_t', 'get_time'],
    ])
    const response = completed!.response
    expect(response.status).toBe('completed')
    expect(response.output[0].content[0].text).toBe(TEXT)
    const calls = response.output
      .filter((item: Json) => item.type === 'function_call')
      .map((item: Json) => ({ id: item.call_id, name: item.name, args: item.arguments }))
    expect(calls).toEqual(CALLS)
    expect([args.get(1), args.get(2)]).toEqual(CALLS.map((c) => c.args))
    expect(response.usage).toMatchObject({ input_tokens: 12, output_tokens: 30, total_tokens: 42 })
  })

  test('/v1/messages: each tool_use block opens when its call starts, input_json_delta per fragment', async () => {
    gates = [new Gate(), new Gate()]
    const client = new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
    const tools = CALLS.map((c) => ({ name: c.name, input_schema: { type: 'object' as const } }))
    const json = new Map<number, string>()
    const starts: Json[] = []
    let delta: Json | null = null
    const stream = client.messages.stream({
      model: 'llama-3.3-70b',
      max_tokens: 256,
      tools,
      messages: [{ role: 'user', content: 'weather and time?' }],
    })
    await charge(async () => {
      for await (const event of stream as AsyncIterable<Json>) {
        if (event.type === 'content_block_start') starts.push(event)
        if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta')
          json.set(event.index, (json.get(event.index) ?? '') + event.delta.partial_json)
        if (event.type === 'message_delta') delta = event
        if (json.get(1) === '{"city":"Pa') gates[0].release()
        if (json.get(2) === '{"tz":"CET"') gates[1].release()
      }
      return delta!.costUsdc
    })
    expect(gates.map((g) => g.released)).toEqual(['test', 'test'])
    expect(starts.map((e) => [e.index, e.content_block])).toEqual([
      [0, { type: 'text', text: '', citations: null }],
      [1, { type: 'tool_use', id: 'call_w', name: 'get_weather', input: {} }],
      [2, { type: 'tool_use', id: 'call_t', name: 'get_time', input: {} }],
    ])
    const final = await stream.finalMessage()
    expect(final.content as unknown[]).toEqual([
      { type: 'text', text: TEXT, citations: null },
      ...CALLS.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: JSON.parse(c.args) })),
    ])
    expect([json.get(1), json.get(2)]).toEqual(CALLS.map((c) => c.args))
    expect(final.stop_reason).toBe('tool_use')
    expect(delta!.usage).toMatchObject({ input_tokens: 12, output_tokens: 30 })
  })
})
