// Suppliers that give content as a list of parts, not a string: Mistral's magistral models stream
// `[{type:'thinking', thinking:[{type:'text', text}]}, {type:'text', text}]`, some OpenAI-compatible
// servers `[{type:'text', text}]`, and answer buffered the same way. That content is generated text
// (and thinking is reasoning): it keeps a stream alive past the idle time, is billed on the estimate
// when no usage comes (the same count as the same text given as strings), passes on chat as it
// came, and becomes text and reasoning in Responses and thinking and text in Messages. Read through
// the real openai, Anthropic and MCP SDKs.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import OpenAI from 'openai'
import type { RequestView } from '../../src/records/lookup.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer, postOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

const MODEL = 'llama-3.3-70b'
const USAGE = { prompt_tokens: 9, completion_tokens: 12, total_tokens: 21 }
const IDLE_MS = 1500
// Each ends a line: the buffered strings answer counts its reasoning after its text, parts in order.
const THINKING = ['Let me ', 'think.\n']
const TEXT = ['The answer', ' is 4.\n']

const thinkingPart = (text: string) => ({ type: 'thinking', thinking: [{ type: 'text', text }] })
const textPart = (text: string) => ({ type: 'text', text })

/** The answer as parts, one per delta (thinking, then text), or as the same text in strings. */
const DELTAS = {
  parts: [
    ...THINKING.map((t) => ({ content: [thinkingPart(t)] })),
    ...TEXT.map((t) => ({ content: [textPart(t)] })),
  ],
  strings: [...THINKING.map((t) => ({ reasoning_content: t })), ...TEXT.map((t) => ({ content: t }))],
}
const MESSAGE = {
  parts: [thinkingPart(THINKING.join('')), textPart(TEXT.join(''))],
  strings: TEXT.join(''),
}

/** What the supplier does with the next request. */
let plan: { shape: 'parts' | 'strings'; usage: boolean; rounds: number; gapMs: number } = {
  shape: 'parts',
  usage: true,
  rounds: 1,
  gapMs: 0,
}

let stack: TestStack
let buyer: TestAccount
let openai: OpenAI
let anthropic: Anthropic
let supplier: ReturnType<typeof Bun.serve>

const chunk = (body: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-a', object: 'chat.completion.chunk', created: 1, model: MODEL, ...body })}\n\n`

function streamBody(): ReadableStream<Uint8Array> {
  const { shape, usage, rounds, gapMs } = plan
  const frames: string[] = []
  for (let round = 0; round < rounds; round++) {
    for (const delta of DELTAS[shape]) frames.push(chunk({ choices: [{ index: 0, delta }] }))
  }
  frames.push(chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }))
  if (usage) frames.push(chunk({ choices: [], usage: USAGE }))
  frames.push('data: [DONE]\n\n')
  const encoder = new TextEncoder()
  let timer: Timer | undefined
  return new ReadableStream<Uint8Array>({
    start(controller) {
      // Paced as a slow model generates: each frame some time after the last.
      const next = () => {
        const frame = frames.shift()
        if (frame === undefined) return controller.close()
        controller.enqueue(encoder.encode(frame))
        timer = setTimeout(next, gapMs)
      }
      next()
    },
    cancel() {
      clearTimeout(timer)
    },
  })
}

beforeAll(async () => {
  supplier = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const body = (await request.json()) as { stream?: boolean }
      if (body.stream) return new Response(streamBody(), { headers: { 'content-type': 'text/event-stream' } })
      return Response.json({
        id: 'chatcmpl-a',
        object: 'chat.completion',
        created: 1,
        model: MODEL,
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: MESSAGE[plan.shape],
              ...(plan.shape === 'strings' ? { reasoning_content: THINKING.join('') } : {}),
            },
            finish_reason: 'stop',
          },
        ],
        ...(plan.usage ? { usage: USAGE } : {}),
      })
    },
  })
  stack = await startStack({ env: { SVC_STREAM_IDLE_MS: String(IDLE_MS), SVC_OFFER_COOLDOWN_MS: '0' } })
  await postOffer(stack, `http://127.0.0.1:${supplier.port}`, 40)
  buyer = await fundedBuyer(stack, '5.000000')
  openai = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
  anthropic = new Anthropic({ apiKey: buyer.apiKey, baseURL: stack.url, maxRetries: 0 })
})
afterAll(async () => {
  await stack.stop()
  supplier.stop(true)
})

const messages = [{ role: 'user' as const, content: 'What is 2 + 2?' }]

async function record(reference: string): Promise<RequestView> {
  const response = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
  expect(response.status).toBe(200)
  return (await response.json()) as RequestView
}

/** A raw chat request: its reference, body and what it cost the buyer. */
async function chat(stream: boolean) {
  const before = await balances(stack, buyer.accountId)
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: MODEL, messages, stream },
  })
  const text = await response.text()
  const after = await balances(stack, buyer.accountId)
  expect(after.held).toBe(0)
  return {
    status: response.status,
    reference: response.headers.get('x-svc-support-reference')!,
    text,
    charged: before.confirmed - after.confirmed,
  }
}

describe('chat', () => {
  test('a stream of parts longer than the idle time is relayed as it came, whole, and billed on usage', async () => {
    // Each delta well within the idle time of the last, the stream twice as long as it.
    plan = { shape: 'parts', usage: true, rounds: 6, gapMs: 120 }
    const stream = await openai.chat.completions.create({ model: MODEL, messages, stream: true })
    const chunks: Record<string, unknown>[] = []
    for await (const c of stream) chunks.push(c as unknown as Record<string, unknown>)
    const deltas = chunks
      .flatMap((c) => (c.choices as { delta?: Record<string, unknown> }[]) ?? [])
      .map((c) => c.delta)
      .filter((d) => d?.content !== undefined)
    expect(deltas).toEqual(Array.from({ length: 6 }, () => DELTAS.parts).flat())
    expect(chunks.at(-2)!.usage).toMatchObject(USAGE)
    expect(chunks.at(-1)!.object).toBe('svc.cost')
    const { supportReference } = chunks.at(-1) as { supportReference: string }
    expect((await record(supportReference)).usage).toMatchObject({
      outputTokens: USAGE.completion_tokens,
      estimated: false,
    })
  }, 30_000)

  test('a stream of parts without usage is billed on its text, as the same text in strings is', async () => {
    const results = []
    for (const shape of ['strings', 'parts'] as const) {
      plan = { shape, usage: false, rounds: 1, gapMs: 0 }
      const r = await chat(true)
      const last = sseData(r.text).at(-1) as { error?: { code: string } }
      expect(last.error?.code).toBe('stream_incomplete')
      results.push({ charged: r.charged, usage: (await record(r.reference)).usage })
    }
    const [strings, parts] = results
    expect(strings!.usage!.outputTokens).toBeGreaterThan(0)
    expect(parts!.usage).toEqual(strings!.usage)
    expect(parts!.charged).toBe(strings!.charged)
  })

  test('a buffered answer of parts without usage is delivered as it came and billed on its text', async () => {
    const results = []
    for (const shape of ['strings', 'parts'] as const) {
      plan = { shape, usage: false, rounds: 1, gapMs: 0 }
      const r = await chat(false)
      expect(r.status).toBe(200)
      const body = JSON.parse(r.text) as { choices: { message: { content: unknown } }[] }
      expect(body.choices[0]!.message.content).toEqual(MESSAGE[shape])
      results.push({ charged: r.charged, usage: (await record(r.reference)).usage })
    }
    const [strings, parts] = results
    expect(strings!.usage!.outputTokens).toBeGreaterThan(0)
    expect(parts!.usage).toEqual(strings!.usage)
    expect(parts!.charged).toBe(strings!.charged)
  })
})

type ReasoningItem = { type: string; content?: { text: string }[] }

describe('responses', () => {
  for (const stream of [false, true]) {
    test(`${stream ? 'streamed' : 'buffered'}: parts become the reasoning item and the message`, async () => {
      plan = { shape: 'parts', usage: true, rounds: 1, gapMs: 0 }
      const request = { model: MODEL, input: 'What is 2 + 2?' }
      const response = stream
        ? await openai.responses.stream(request).finalResponse()
        : await openai.responses.create(request)
      expect(response.status).toBe('completed')
      expect(response.output.map((item) => item.type)).toEqual(['reasoning', 'message'])
      const reasoning = response.output[0] as unknown as ReasoningItem
      expect(reasoning.content?.map((part) => part.text).join('')).toBe(THINKING.join(''))
      expect(response.output_text).toBe(TEXT.join(''))
    })
  }
})

test("the MCP chat tool gives the answer's text, as it gives a string answer", async () => {
  const mcp = new Client({ name: 'svc-test', version: '1.0.0' })
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${buyer.apiKey}` } },
    }),
  )
  try {
    const texts = []
    for (const shape of ['strings', 'parts'] as const) {
      plan = { shape, usage: true, rounds: 1, gapMs: 0 }
      const result = await mcp.callTool({
        name: 'chat',
        arguments: { model: MODEL, prompt: 'What is 2 + 2?' },
      })
      texts.push((result.structuredContent as { text: string }).text)
    }
    expect(texts).toEqual([TEXT.join(''), TEXT.join('')])
  } finally {
    await mcp.close()
  }
})

describe('messages', () => {
  for (const stream of [false, true]) {
    test(`${stream ? 'streamed' : 'buffered'}: parts become the thinking and the text blocks`, async () => {
      plan = { shape: 'parts', usage: true, rounds: 1, gapMs: 0 }
      const request = { model: MODEL, max_tokens: 64, messages }
      const message = stream
        ? await anthropic.messages.stream(request).finalMessage()
        : await anthropic.messages.create(request)
      expect(message.stop_reason).toBe('end_turn')
      expect(message.content.map((block) => block.type)).toEqual(['thinking', 'text'])
      const [thinking, text] = message.content as [Anthropic.ThinkingBlock, Anthropic.TextBlock]
      expect(thinking.thinking).toBe(THINKING.join(''))
      expect(text.text).toBe(TEXT.join(''))
      expect(message.usage.output_tokens).toBe(USAGE.completion_tokens)
    })
  }
})
