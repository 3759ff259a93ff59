// A supplier treated as an adversary, through the whole gateway: what it sends can take neither
// money nor memory. Answers past a bound are cut while they arrive (counted on the supplier's side:
// what the gateway's socket accepted before it closed); a body past its bound falls forward at no
// charge; a stream is relayed only as chat chunks; the supplier's words never reach the buyer.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import type { Server } from 'bun'
import { auditAll } from '../../src/cli/audit.ts'
import { createLogger } from '../../src/logger.ts'
import { formatMicros } from '../../src/money/units.ts'
import { adminFetch, keyFetch, logCapture, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, simOffer, sseData } from '../helpers/buyers.ts'
import {
  type HostileAnswer,
  type HostileCall,
  type HostileSupplier,
  hostileSupplier,
  httpHead,
  sseAnswer,
  wholeAnswer,
} from '../helpers/hostile-supplier.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

const KIB = 1024
const MIB = 1024 * KIB
const BODY_BOUND = 256 * KIB
const FRAME_BOUND = 64 * KIB
const STREAM_BOUND = MIB
const VIDEO_BOUND = 256 * KIB
/** What a hostile answer offers: far past every bound. */
const HUGE = 64 * MIB
/**
 * What the gateway's socket may have taken in before its close reached the supplier: the bound,
 * what the kernel buffers on the way, and a read or two in flight. Far below HUGE either way.
 */
const TAKEN_AT_MOST = HUGE / 4

let stack: TestStack
let hostile: HostileSupplier
let buyer: TestAccount
let hostileOfferId: string
const logs = logCapture()
/** What the hostile supplier answers the current test's calls with. */
let answer: (call: HostileCall) => HostileAnswer

beforeAll(async () => {
  hostile = hostileSupplier((call) => answer(call))
  stack = await startStack({
    env: {
      SVC_MAX_UPSTREAM_BODY_BYTES: String(BODY_BOUND),
      SVC_MAX_UPSTREAM_FRAME_BYTES: String(FRAME_BOUND),
      SVC_MAX_UPSTREAM_STREAM_BYTES: String(STREAM_BOUND),
      SVC_MAX_UPSTREAM_VIDEO_BYTES: String(VIDEO_BOUND),
      SVC_OFFER_COOLDOWN_MS: '0',
    },
    logger: createLogger('info', 'svc-test', logs.stream),
  })
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: { upstreamBaseUrl: hostile.url, upstreamApiKey: 'hostile-key', askCents: 33, capacityDiem: '50' },
  })
  expect(offer.status).toBe(201)
  hostileOfferId = ((await offer.json()) as { id: string }).id
  await simOffer(stack, 48) // the honest backup every failure falls forward to
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  await stack.stop()
  hostile.stop()
})
beforeEach(() => {
  hostile.calls.length = 0
})

const MESSAGES = [{ role: 'user', content: 'hello' }]

const chat = (extra: Record<string, unknown> = {}) =>
  keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: MESSAGES, max_tokens: 8, ...extra },
  })

/** The request's attempts as the buyer's record shows them. */
async function attempts(reference: string) {
  const response = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
  expect(response.status).toBe(200)
  const view = (await response.json()) as { attempts: { offerId: string | null; errorCode: string | null }[] }
  return view.attempts
}

/** The one call the hostile supplier got, after the gateway closed it or it ended. */
function onlyCall(): HostileCall {
  expect(hostile.calls).toHaveLength(1)
  return hostile.calls[0]!
}

const chunk = (content: string) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-h',
    object: 'chat.completion.chunk',
    model: 'llama-3.3-70b',
    choices: [{ index: 0, delta: { content }, finish_reason: null }],
  })}`
const USAGE = { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 }
const usageChunk = `data: ${JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion.chunk', choices: [], usage: USAGE })}`

/** Served by the honest backup at its ask after the hostile offer failed: charged that, and only that. */
async function expectFellForward(response: Response, before: { confirmed: number }, code: string) {
  expect(response.status).toBe(200)
  expect(response.headers.get('x-svc-clearing-price-cents')).toBe('48')
  const body = (await response.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }
  const after = await balances(stack, buyer.accountId)
  expect(before.confirmed - after.confirmed).toBe(expectedCost(body.usage, 48))
  expect(after.held).toBe(0)
  const tried = await attempts(response.headers.get('x-svc-support-reference')!)
  expect(tried.map((a) => [a.offerId === hostileOfferId, a.errorCode])).toEqual([
    [true, code],
    [false, null],
  ])
}

describe('a buffered answer is read within its bound', () => {
  test('a body with no length that never ends: cut at the bound, upstream_too_large, served by the next offer', async () => {
    answer = () => ({
      head: httpHead(200, { 'content-type': 'application/json', connection: 'close' }),
      body: '{"choices":[{"index":0,"message":{"role":"assistant","content":"',
      fill: HUGE,
      tail: '"}}]}',
      close: true,
    })
    const before = await balances(stack, buyer.accountId)
    await expectFellForward(await chat(), before, 'upstream_too_large')
    const call = onlyCall()
    expect(call.finished).toBe(false)
    expect(call.closed).toBe(true)
    expect(call.sent).toBeLessThan(TAKEN_AT_MOST)
  })

  test('a chunked body of 1-byte chunks, each with a 4 KiB extension: cut once its framing passes the bound, upstream_too_large', async () => {
    const start = '{"choices":[{"index":0,"message":{"role":"assistant","content":"'
    // 4,096 bytes a chunk (a divisor of the fill): one body byte, the rest its size line and CRLFs.
    const tinyChunk = `1;e=${'x'.repeat(4_087)}\r\na\r\n`
    answer = () => ({
      head: httpHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }),
      body: `${start.length.toString(16)}\r\n${start}\r\n`,
      fill: HUGE,
      fillWith: tinyChunk,
      tail: '5\r\n"}}]}\r\n0\r\n\r\n',
    })
    const before = await balances(stack, buyer.accountId)
    await expectFellForward(await chat(), before, 'upstream_too_large')
    const call = onlyCall()
    expect(call.finished).toBe(false)
    expect(call.closed).toBe(true)
    expect(call.sent).toBeLessThan(TAKEN_AT_MOST)
  })

  test('an honest chunked answer, each chunk with a short extension, is served and charged as any other', async () => {
    const text = JSON.stringify({
      id: 'chatcmpl-h',
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
      usage: USAGE,
    })
    let body = ''
    for (let at = 0; at < text.length; at += 16) {
      const piece = text.slice(at, at + 16)
      body += `${piece.length.toString(16)};name="value"\r\n${piece}\r\n`
    }
    answer = () => ({
      head: httpHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }),
      body: `${body}0\r\n\r\n`,
    })
    const before = await balances(stack, buyer.accountId)
    const response = await chat()
    expect(response.status).toBe(200)
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('33')
    const answered = (await response.json()) as { choices: { message: { content: string } }[] }
    expect(answered.choices[0]!.message.content).toBe('hello')
    const after = await balances(stack, buyer.accountId)
    expect(before.confirmed - after.confirmed).toBe(expectedCost(USAGE, 33))
    expect(after.held).toBe(0)
    expect(onlyCall().finished).toBe(true)
  })

  test('a Content-Length past the bound: closed at the head, none of the body read', async () => {
    answer = () => ({
      head: httpHead(200, { 'content-type': 'application/json', 'content-length': HUGE }),
      fill: HUGE,
    })
    const before = await balances(stack, buyer.accountId)
    await expectFellForward(await chat(), before, 'upstream_too_large')
    const call = onlyCall()
    expect(call.finished).toBe(false)
    expect(call.sent).toBeLessThan(TAKEN_AT_MOST)
  })

  test('an error body that never ends: only its start is read, and the request falls forward', async () => {
    answer = () => ({
      head: httpHead(500, { 'content-type': 'application/json', connection: 'close' }),
      body: '{"error":{"message":"',
      fill: HUGE,
      close: true,
    })
    const before = await balances(stack, buyer.accountId)
    await expectFellForward(await chat(), before, 'upstream_500')
    const call = onlyCall()
    expect(call.finished).toBe(false)
    expect(call.closed).toBe(true)
    expect(call.sent).toBeLessThan(TAKEN_AT_MOST)
  })
})

describe('a buffered answer without usage is paid for what it generated, and only then', () => {
  const answerOf = (message: Record<string, unknown> | null) =>
    JSON.stringify({
      id: 'chatcmpl-h',
      object: 'chat.completion',
      choices:
        message === null
          ? []
          : [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop' }],
    })

  test('no choices, or an empty message: nothing delivered, upstream_no_content, served by the next offer', async () => {
    for (const message of [null, { content: '' }, { content: null, tool_calls: null }]) {
      answer = () => wholeAnswer(200, answerOf(message))
      const before = await balances(stack, buyer.accountId)
      await expectFellForward(await chat(), before, 'upstream_no_content')
    }
  })

  test('choices that are not a list of choices: nothing delivered, served by the next offer', async () => {
    for (const [choices, code] of [
      [5, 'upstream_broken_body'],
      ['abc', 'upstream_broken_body'],
      [[5, null], 'upstream_no_content'],
    ] as const) {
      answer = () =>
        wholeAnswer(200, JSON.stringify({ id: 'chatcmpl-h', object: 'chat.completion', choices }))
      const before = await balances(stack, buyer.accountId)
      await expectFellForward(await chat(), before, code)
    }
  })

  test('tool calls and reasoning count as generated, as a stream counts them', async () => {
    const charged = async (message: Record<string, unknown>) => {
      answer = () => wholeAnswer(200, answerOf(message))
      const before = await balances(stack, buyer.accountId)
      const response = await chat()
      expect(response.status).toBe(200)
      expect(response.headers.get('x-svc-clearing-price-cents')).toBe('33')
      const after = await balances(stack, buyer.accountId)
      expect(after.held).toBe(0)
      return before.confirmed - after.confirmed
    }
    const call = [
      {
        id: 'call_1',
        type: 'function',
        function: { name: 'lookup', arguments: JSON.stringify({ q: 'x'.repeat(400) }) },
      },
    ]
    const words = await charged({ content: 'ok' })
    expect(await charged({ content: null, tool_calls: call })).toBeGreaterThan(words)
    expect(await charged({ content: '', reasoning_content: 'because '.repeat(50) })).toBeGreaterThan(words)
    // Reasoning under the other name suppliers give it, and a refusal, are generated text as well.
    expect(await charged({ content: '', reasoning: 'because '.repeat(50) })).toBeGreaterThan(words)
    expect(await charged({ content: null, refusal: 'I will not. '.repeat(40) })).toBeGreaterThan(words)
  })
})

/** A stream the hostile offer failed before any byte, served whole by the honest backup at its ask. */
async function expectStreamFellForward(text: string, before: { confirmed: number }) {
  const frames = sseData(text)
  expect(frames.at(-1)).toBe('[DONE]')
  const cost = frames.at(-2) as { costUsdc: string; clearingPriceCents: number; supportReference: string }
  // Served by the honest backup: charged there, and only there.
  expect(cost.clearingPriceCents).toBe(48)
  const after = await balances(stack, buyer.accountId)
  expect(before.confirmed - after.confirmed).toBe(Number(cost.costUsdc.replace('.', '')))
  const tried = await attempts(cost.supportReference)
  expect(tried.map((a) => [a.offerId === hostileOfferId, a.errorCode])).toEqual([
    [true, 'upstream_stream_error'],
    [false, null],
  ])
}

describe('a stream is relayed only as chat chunks, each frame bounded', () => {
  /** The stream's frames, its svc.cost frame, and the balance change matching it. */
  async function relayed(before: { confirmed: number }) {
    const response = await chat({ stream: true })
    expect(response.status).toBe(200)
    const text = await response.text()
    const frames = sseData(text)
    const costs = frames.filter((f) => typeof f === 'object' && f.object === 'svc.cost') as {
      costUsdc: string
      clearingPriceCents: number
    }[]
    // One cost frame, the gateway's own, at the hostile offer's ask
    expect(costs).toHaveLength(1)
    expect(costs[0]!.clearingPriceCents).toBe(33)
    const after = await balances(stack, buyer.accountId)
    expect(formatMicros(before.confirmed - after.confirmed)).toBe(costs[0]!.costUsdc)
    expect(after.held).toBe(0)
    return { text, frames, cost: costs[0]! }
  }

  const contents = (frames: (Record<string, unknown> | string)[]) =>
    frames
      .filter((f) => typeof f === 'object' && Array.isArray(f.choices) && f.choices.length > 0)
      .map((f) => (f as { choices: { delta: { content: string } }[] }).choices[0]!.delta.content)

  test('a frame with no end: the stream ends truncated at the bound, billed on estimate', async () => {
    answer = () => ({
      head: httpHead(200, { 'content-type': 'text/event-stream', connection: 'close' }),
      body: `${chunk('hello')}\n\n${chunk('world').slice(0, -20)}`,
      fill: HUGE / 4, // a line this long is a frame without end to the old parser, and slow
      close: true,
    })
    const before = await balances(stack, buyer.accountId)
    const { frames } = await relayed(before)
    expect(contents(frames)).toEqual(['hello'])
    expect(frames).not.toContain('[DONE]')
    expect((frames.at(-1) as { error: { code: string } }).error.code).toBe('stream_incomplete')
    const call = onlyCall()
    expect(call.finished).toBe(false)
    expect(call.closed).toBe(true)
    expect(call.sent).toBeLessThan(HUGE / 8)
  })

  /** A content frame padded to `bytes` in all, its blank line included. */
  const paddedFrame = (bytes: number) => {
    const bare = `${chunk('')}\n\n`
    const words = 'flowing on '.repeat(bytes).slice(0, bytes - bare.length)
    return `${chunk(words)}\n\n`
  }

  /** A stream cut at the stream bound: what was relayed is billed on its estimate, stream_incomplete. */
  async function expectCutAtStreamBound() {
    const before = await balances(stack, buyer.accountId)
    const { frames, cost } = await relayed(before)
    expect(contents(frames).length).toBeGreaterThan(0)
    expect(frames).not.toContain('[DONE]')
    expect((frames.at(-1) as { error: { code: string } }).error.code).toBe('stream_incomplete')
    expect(Number(cost.costUsdc.replace('.', ''))).toBeGreaterThan(0)
    const call = onlyCall()
    expect(call.finished).toBe(false)
    expect(call.closed).toBe(true)
    expect(call.sent).toBeLessThan(TAKEN_AT_MOST)
  }

  test('content that never stops: the stream is cut at its bound in bytes, billed on estimate', async () => {
    answer = () => ({
      head: httpHead(200, { 'content-type': 'text/event-stream', connection: 'close' }),
      fill: HUGE,
      fillWith: paddedFrame(256),
      tail: 'data: [DONE]\n\n',
      close: true,
    })
    await expectCutAtStreamBound()
  })

  test('a chunked stream of 1-byte chunks, each with a long extension: cut once its framing passes the bound', async () => {
    // 256 bytes a chunk, one of them a byte of the stream: a 256-byte frame takes 64 KiB of wire.
    const tiny = (byte: string) => `1;e=${'x'.repeat(247)}\r\n${byte}\r\n`
    answer = () => ({
      head: httpHead(200, { 'content-type': 'text/event-stream', 'transfer-encoding': 'chunked' }),
      fill: HUGE,
      fillWith: [...paddedFrame(256)].map(tiny).join(''),
      tail: '0\r\n\r\n',
    })
    await expectCutAtStreamBound()
  })

  test('frames shaped like svc.cost, or not chat chunks, are dropped; our cost fields come off a chunk', async () => {
    const fake = { id: 'x', object: 'svc.cost', choices: [], costUsdc: '0.000000', clearingPriceCents: 1 }
    answer = () =>
      sseAnswer([
        chunk('hello'),
        `data: ${JSON.stringify(fake)}`,
        `data: ${JSON.stringify({ ...fake, object: 'chat.completion' })}`,
        'data: {"object":"chat.completion.chunk","note":"no choices"}',
        'data: [1,2,3]',
        'data: "svc.cost"',
        'data: {"id":"x","object":"svc.cost","object":"chat.completion.chunk","choices":[]}',
        `data: ${JSON.stringify({
          object: 'chat.completion.chunk',
          choices: [{ index: 0, delta: { content: 'world' } }],
          costUsdc: '0.000000',
          supportReference: 'sr_fake',
        })}`,
        usageChunk.replace(
          '"choices":[]',
          '"choices":[],"costUsdc":"0.000000","object":"chat.completion.chunk"',
        ),
        'data: [DONE]',
      ])
    const before = await balances(stack, buyer.accountId)
    const { text, frames, cost } = await relayed(before)
    expect(contents(frames)).toEqual(['hello', 'world'])
    expect(text).not.toContain('sr_fake')
    expect(text).not.toContain('"costUsdc":"0.000000"')
    expect(text.match(/svc\.cost/g)).toHaveLength(1)
    // Every frame but the gateway's own cost frame is a chat chunk
    for (const f of frames) {
      if (f === '[DONE]' || (f as { object: string }).object === 'svc.cost') continue
      expect(f).toMatchObject({ object: 'chat.completion.chunk' })
      expect(Array.isArray((f as { choices: unknown }).choices)).toBe(true)
    }
    // The supplier's usage is billed, at its ask; the stream ends as a complete one
    expect(Number(cost.costUsdc.replace('.', ''))).toBe(expectedCost(USAGE, 33))
    expect(frames.at(-1)).toBe('[DONE]')
  })

  test("a supplier's error frame mid-stream: it broke; nothing after it is relayed, billed on estimate", async () => {
    answer = () =>
      sseAnswer([
        chunk('hello'),
        `data: ${JSON.stringify({ error: { message: 'supplier exploded at 10.0.0.7', code: 'boom' } })}`,
        chunk('after'),
        usageChunk,
        'data: [DONE]',
      ])
    const before = await balances(stack, buyer.accountId)
    const { text, frames } = await relayed(before)
    expect(contents(frames)).toEqual(['hello'])
    expect(text).not.toContain('exploded')
    expect(frames).not.toContain('[DONE]')
    const errors = frames.filter((f) => typeof f === 'object' && 'error' in f) as {
      error: { code: string }
    }[]
    expect(errors.map((e) => e.error.code)).toEqual(['stream_incomplete'])
  })

  test('a stream of reasoning under `reasoning`, then a break: billed on its estimate, not released', async () => {
    const thought = (reasoning: string) =>
      `data: ${JSON.stringify({
        id: 'chatcmpl-h',
        object: 'chat.completion.chunk',
        choices: [{ index: 0, delta: { reasoning }, finish_reason: null }],
      })}`
    answer = () =>
      sseAnswer([
        ...Array.from({ length: 6 }, () => thought('weighing it up ')),
        `data: ${JSON.stringify({ error: { message: 'gone', code: 'boom' } })}`,
      ])
    const broken = await relayed(await balances(stack, buyer.accountId))
    expect(broken.frames.filter((f) => typeof f === 'object' && 'error' in f)).toMatchObject([
      { error: { code: 'stream_incomplete' } },
    ])
    expect(Number(broken.cost.costUsdc.replace('.', ''))).toBeGreaterThan(0)
  })

  test('usage reported on a content chunk, then more content, then a break: incomplete, billed on the estimate', async () => {
    const early = { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 }
    const withUsage = (content: string, usage: typeof early) =>
      `data: ${JSON.stringify({
        id: 'chatcmpl-h',
        object: 'chat.completion.chunk',
        choices: [{ index: 0, delta: { content }, finish_reason: null }],
        usage,
      })}`
    answer = () =>
      sseAnswer([
        withUsage('hello', early),
        ...Array.from({ length: 6 }, () => chunk(' and more words')),
        `data: ${JSON.stringify({ error: { message: 'gone', code: 'boom' } })}`,
      ])
    const broken = await relayed(await balances(stack, buyer.accountId))
    expect(broken.frames).not.toContain('[DONE]')
    expect(broken.frames.filter((f) => typeof f === 'object' && 'error' in f)).toMatchObject([
      { error: { code: 'stream_incomplete' } },
    ])
    // The early report is not relayed as the stream's usage, nor billed: the estimate counts more.
    expect(broken.frames.some((f) => typeof f === 'object' && 'usage' in f)).toBe(false)
    expect(Number(broken.cost.costUsdc.replace('.', ''))).toBeGreaterThan(expectedCost(early, 33))

    // Reported as it goes, to the last chunk: complete, billed at the last report.
    answer = () => sseAnswer([withUsage('hello', early), withUsage(' world', USAGE), 'data: [DONE]'])
    const whole = await relayed(await balances(stack, buyer.accountId))
    expect(whole.frames.at(-1)).toBe('[DONE]')
    expect(Number(whole.cost.costUsdc.replace('.', ''))).toBe(expectedCost(USAGE, 33))

    // A chunk that generated nothing (null fields, as some suppliers close with) leaves the report.
    const empty = `data: ${JSON.stringify({
      id: 'chatcmpl-h',
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta: { content: null, tool_calls: null }, finish_reason: 'stop' }],
    })}`
    answer = () => sseAnswer([withUsage('hello', USAGE), empty, 'data: [DONE]'])
    const closed = await relayed(await balances(stack, buyer.accountId))
    expect(closed.frames.at(-1)).toBe('[DONE]')
    expect(Number(closed.cost.costUsdc.replace('.', ''))).toBe(expectedCost(USAGE, 33))
  })

  test('a supplier whose first frame is an error: nothing reached the client, so it falls forward at no charge', async () => {
    answer = () =>
      sseAnswer([
        `data: ${JSON.stringify({ error: { message: 'no capacity at 10.0.0.7', code: 'overloaded' } })}`,
        chunk('never'),
        'data: [DONE]',
      ])
    const before = await balances(stack, buyer.accountId)
    const response = await chat({ stream: true })
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(text).not.toContain('never')
    expect(text).not.toContain('overloaded')
    await expectStreamFellForward(text, before)
  })

  test('a first frame with no end: nothing reached the client, so it falls forward at no charge', async () => {
    answer = () => ({
      head: httpHead(200, { 'content-type': 'text/event-stream', connection: 'close' }),
      body: 'data: {"id":"chatcmpl-h","choices":[{"delta":{"content":"',
      fill: HUGE,
      close: true,
    })
    const before = await balances(stack, buyer.accountId)
    const response = await chat({ stream: true })
    expect(response.status).toBe(200)
    await expectStreamFellForward(await response.text(), before)
    expect((await balances(stack, buyer.accountId)).held).toBe(0)
    const call = onlyCall()
    expect(call.closed).toBe(true)
    expect(call.sent).toBeLessThan(TAKEN_AT_MOST)
  })

  const roleChunk = `data: ${JSON.stringify({
    id: 'chatcmpl-h',
    object: 'chat.completion.chunk',
    model: 'llama-3.3-70b',
    choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }],
  })}`

  /** The stream the buyer got: no cost frame, no [DONE], the error that says nothing was charged. */
  async function expectNothingCharged(response: Response, before: { confirmed: number }) {
    expect(response.status).toBe(200)
    const frames = sseData(await response.text())
    expect(frames).not.toContain('[DONE]')
    expect(frames.some((f) => typeof f === 'object' && f.object === 'svc.cost')).toBe(false)
    const last = frames.at(-1) as { error: { code: string; message: string; supportReference: string } }
    expect(last.error.code).toBe('provider_error')
    expect(last.error.message).toContain('nothing was charged')
    const after = await balances(stack, buyer.accountId)
    expect(after.confirmed).toBe(before.confirmed)
    expect(after.held).toBe(0)
    const tried = await attempts(last.error.supportReference)
    expect(tried.map((a) => [a.offerId === hostileOfferId, a.errorCode])).toEqual([
      [true, 'upstream_no_content'],
    ])
  }

  test('a role chunk, then a frame with no end: no content reached the client, so nothing is charged', async () => {
    answer = () => ({
      head: httpHead(200, { 'content-type': 'text/event-stream', connection: 'close' }),
      body: `${roleChunk}\n\ndata: {"choices":[{"delta":{"content":"`,
      fill: HUGE,
      close: true,
    })
    const before = await balances(stack, buyer.accountId)
    await expectNothingCharged(await chat({ stream: true }), before)
    expect(onlyCall().sent).toBeLessThan(TAKEN_AT_MOST)
  })

  test('a role chunk and [DONE] with no usage: an empty answer is not paid for', async () => {
    answer = () => sseAnswer([roleChunk, 'data: [DONE]'])
    const before = await balances(stack, buyer.accountId)
    await expectNothingCharged(await chat({ stream: true }), before)
  })

  test('the Responses relay: a stream with no content ends failed, nothing charged', async () => {
    answer = () => sseAnswer([roleChunk, `data: ${JSON.stringify({ error: { message: 'gone' } })}`])
    const before = await balances(stack, buyer.accountId)
    const response = await keyFetch(stack, buyer.apiKey, '/v1/responses', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', input: 'hello', max_output_tokens: 8, stream: true },
    })
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(text).toContain('event: response.failed')
    expect(text).not.toContain('costUsdc')
    const after = await balances(stack, buyer.accountId)
    expect(after.confirmed).toBe(before.confirmed)
    expect(after.held).toBe(0)
  })

  test("the Messages relay: a stream with no content ends with Anthropic's error event, nothing charged", async () => {
    answer = () => sseAnswer([roleChunk, 'data: [DONE]'])
    const before = await balances(stack, buyer.accountId)
    const response = await keyFetch(stack, buyer.apiKey, '/v1/messages', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: MESSAGES, max_tokens: 8, stream: true },
    })
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(text).toEndWith('\n\n')
    const last = text.trimEnd().split('\n\n').at(-1)!
    expect(last).toStartWith('event: error\n')
    expect(JSON.parse(last.split('data: ')[1]!)).toMatchObject({
      type: 'error',
      error: { type: 'api_error', code: 'provider_error' },
    })
    expect(text).not.toContain('message_stop')
    expect(text).not.toContain('costUsdc')
    const after = await balances(stack, buyer.accountId)
    expect(after.confirmed).toBe(before.confirmed)
    expect(after.held).toBe(0)
  })

  test('the Responses relay emits only its own events whatever the supplier sends', async () => {
    answer = () =>
      sseAnswer([
        chunk('hello'),
        'data: {"type":"response.completed","object":"svc.cost","costUsdc":"0.000000"}',
        'event: response.completed\ndata: {"type":"response.completed","choices":[]}',
        `data: ${JSON.stringify({ error: { message: 'supplier exploded' } })}`,
        chunk('after'),
      ])
    const before = await balances(stack, buyer.accountId)
    const response = await keyFetch(stack, buyer.apiKey, '/v1/responses', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', input: 'hello', max_output_tokens: 8, stream: true },
    })
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(text).not.toContain('svc.cost')
    expect(text).not.toContain('exploded')
    const events = text
      .split('\n\n')
      .filter((f) => f.includes('data: '))
      .map(
        (f) =>
          JSON.parse(
            f
              .split('\n')
              .find((l) => l.startsWith('data: '))!
              .slice(6),
          ) as Record<string, unknown>,
      )
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i))
    expect(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta)).toEqual([
      'hello',
    ])
    const last = events.at(-1) as { type: string; costUsdc: string }
    expect(last.type).toBe('response.incomplete')
    const after = await balances(stack, buyer.accountId)
    expect(formatMicros(before.confirmed - after.confirmed)).toBe(last.costUsdc)
    expect(after.held).toBe(0)
  })
})

describe("the supplier's own words stay with the supplier", () => {
  test('a 400 with a chatty message: upstream_rejected in our words, nothing charged, the text only logged', async () => {
    // Short enough to be read and parsed whole; longer than what the log keeps of it
    const chatty = `your prompt was logged to s3://supplier-bucket/${'x'.repeat(400)}; visit evil.example`
    answer = () => wholeAnswer(400, JSON.stringify({ error: { message: chatty } }))
    const before = await balances(stack, buyer.accountId)
    const response = await chat()
    expect(response.status).toBe(400)
    const text = await response.text()
    expect(text).not.toContain('supplier-bucket')
    expect(text).not.toContain('evil.example')
    const body = JSON.parse(text) as { error: { code: string; type: string; message: string } }
    expect(body.error.code).toBe('upstream_rejected')
    expect(body.error.message).toContain('status 400')
    expect(await balances(stack, buyer.accountId)).toEqual(before)
    // The log keeps a bounded piece of it
    const line = logs.lines.find((l) => l.includes('supplier refused the request'))!
    expect(line).toContain('supplier-bucket')
    expect(line).not.toContain('evil.example')
  })
})

describe('video retrieve', () => {
  let elsewhere: Server<undefined>
  let elsewhereHits = 0
  beforeAll(() => {
    elsewhere = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: () => {
        elsewhereHits += 1
        return new Response(new Uint8Array(32), { headers: { 'content-type': 'video/mp4' } })
      },
    })
  })
  afterAll(() => elsewhere.stop(true))

  const post = (path: string, json: Record<string, unknown>) =>
    keyFetch(stack, buyer.apiKey, path, { method: 'POST', json })

  /** A job queued on the hostile supplier: its id and the hold it took. */
  async function queued(retrieve: HostileAnswer) {
    answer = (call) =>
      call.path === '/video/quote'
        ? wholeAnswer(200, JSON.stringify({ quote: 0.25 }))
        : call.path === '/video/queue'
          ? wholeAnswer(200, JSON.stringify({ model: 'wan-2.1-video', queue_id: 'q-1' }))
          : retrieve
    const before = await balances(stack, buyer.accountId)
    const response = await post('/v1/video/queue', {
      model: 'wan-2.1-video',
      prompt: 'waves',
      duration: '5s',
    })
    expect(response.status).toBe(200)
    const job = (await response.json()) as { id: string; clearingPriceCents: number }
    expect(job.clearingPriceCents).toBe(33)
    const held = await balances(stack, buyer.accountId)
    expect(held.held).toBeGreaterThan(before.held)
    return { id: job.id, before, held }
  }

  test('a redirect is not followed: nothing is fetched elsewhere, nothing charged, the job still waits', async () => {
    const job = await queued({
      head: httpHead(302, { location: `http://127.0.0.1:${elsewhere.port}/media.mp4`, 'content-length': 0 }),
    })
    const response = await post('/v1/video/retrieve', { id: job.id })
    expect(response.status).toBe(502)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('provider_error')
    expect(elsewhereHits).toBe(0)
    expect(await balances(stack, buyer.accountId)).toEqual(job.held)
  })

  test('media past the bound is cut while it arrives: refunded in full, 410 from then on', async () => {
    const job = await queued({
      head: httpHead(200, { 'content-type': 'video/mp4', connection: 'close' }),
      fill: HUGE,
      close: true,
    })
    const response = await post('/v1/video/retrieve', { id: job.id })
    expect(response.status).toBe(410)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('video_refunded')
    const retrieve = hostile.calls.find((c) => c.path === '/video/retrieve')!
    expect(retrieve.finished).toBe(false)
    expect(retrieve.closed).toBe(true)
    expect(retrieve.sent).toBeLessThan(TAKEN_AT_MOST)
    // The hold came back; the earlier job's hold (the redirect test's) is still held
    const after = await balances(stack, buyer.accountId)
    expect(after.confirmed).toBe(job.before.confirmed)
    expect(after.held).toBe(job.before.held)
  })
})

test('the audit finds nothing off', async () => {
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
})
