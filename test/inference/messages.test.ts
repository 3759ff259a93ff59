// POST /v1/messages on the wire: Anthropic's event sequence with the cost on message_delta, the key
// as x-api-key or Bearer (cookies still refused), refusals in Anthropic's error shape with the
// contract's code and hints (400, 429 with retry-after, 503), a cut stream ending with the error
// event, message_delta and message_stop only once the clear committed, fall-forward and the
// request's record as on chat, and bad bodies refused with nothing changed in Redis.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import fc from 'fast-check'
import { auditAll } from '../../src/cli/audit.ts'
import { messagesUsage, stopReason } from '../../src/inference/messages-object.ts'
import { setTokenCountTimeoutMs } from '../../src/inference/token-count.ts'
import { formatMicros, parseMicros } from '../../src/money/units.ts'
import type { RequestView } from '../../src/records/lookup.ts'
import { SCRIPTS } from '../../src/redis/script-registry.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, type SimOffer, simKey, simOffer } from '../helpers/buyers.ts'
import { serverOf } from '../helpers/redis-cluster.ts'
import { startRedisProxy } from '../helpers/redis-proxy.ts'
import { expectShapedRefusal } from '../helpers/refusals.ts'
import {
  onTestDatabase,
  snapshotKeys,
  startStack,
  type TestStack,
  testPrefix,
  testRedisUrl,
} from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

/**
 * The clear on the wire, either way it travels: an FCALL on the native connection (the function's
 * name ends in `_clear`), or ioredis's EVALSHA of the script while that connection reconnects.
 */
const CLEAR = ['_clear\r\n', createHash('sha1').update(SCRIPTS.clear.lua).digest('hex')]

let stack: TestStack
let buyer: TestAccount
let offer: SimOffer

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 9 } })
  offer = await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(() => stack.stop())

const ASK = { model: 'llama-3.3-70b', max_tokens: 50, messages: [{ role: 'user', content: 'hello' }] }

function messages(body: Record<string, unknown>, headers: Record<string, string> = {}, target = stack) {
  return fetch(`${target.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
    body: JSON.stringify(body),
  })
}

function events(text: string) {
  return text
    .trimEnd()
    .split('\n\n')
    .map((frame) => {
      const [name, data] = frame.split('\n')
      return { name: name!.slice(7), data: JSON.parse(data!.slice(6)) as Record<string, unknown> }
    })
}

// Money and market keys only: lastUsedAt on the key and the capacity snapshot move on their own.
const moneyKeys = async () =>
  Object.fromEntries(
    Object.entries(await snapshotKeys(stack.store, stack.keys.prefix)).filter(
      ([k]) => !k.includes(':apikey:') && !k.includes(':capacity:'),
    ),
  )

describe('the stream', () => {
  test("Anthropic's events in order, the cost on message_delta equal to the charge, nothing held", async () => {
    const before = await balances(stack, buyer.accountId)
    const response = await messages({ ...ASK, stream: true }, { 'x-api-key': buyer.apiKey })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toStartWith('text/event-stream')
    const got = events(await response.text())
    for (const { name, data } of got) expect(data.type).toBe(name)
    const names = got.map((e) => e.name)
    expect(names.slice(0, 3)).toEqual(['message_start', 'ping', 'content_block_start'])
    expect(names.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop'])
    // One text block: opened empty, filled by text_delta pieces, closed.
    expect(got.find((e) => e.name === 'content_block_start')!.data).toEqual({
      type: 'content_block_start',
      index: 0,
      content_block: { type: 'text', text: '', citations: null },
    })
    const deltas = got.filter((e) => e.name === 'content_block_delta').map((e) => e.data)
    expect(deltas).toHaveLength(9)
    for (const delta of deltas) {
      expect(delta).toMatchObject({ index: 0, delta: { type: 'text_delta', text: expect.any(String) } })
    }
    expect(got.find((e) => e.name === 'content_block_stop')!.data).toEqual({
      type: 'content_block_stop',
      index: 0,
    })
    const delta = got.find((e) => e.name === 'message_delta')!.data as {
      delta: unknown
      usage: { input_tokens: number; output_tokens: number }
      costUsdc: string
      clearingPriceCents: number
      supportReference: string
    }
    expect(delta.delta).toEqual({ stop_reason: 'end_turn', stop_sequence: null })
    expect(delta.usage.output_tokens).toBe(9)
    expect(delta.clearingPriceCents).toBe(40)
    expect(delta.supportReference).toBe(response.headers.get('x-svc-support-reference')!)
    const after = await balances(stack, buyer.accountId)
    expect(parseMicros(delta.costUsdc)).toBe(before.confirmed - after.confirmed)
    expect(after.held).toBe(0)
  })

  test('cut by the supplier: the error event after the blocks, its estimate charged and said', async () => {
    await simKey(stack, offer.upstreamKey, { fault: 'truncate', times: 1 })
    const before = await balances(stack, buyer.accountId)
    const response = await messages({ ...ASK, stream: true }, { 'x-api-key': buyer.apiKey })
    const got = events(await response.text())
    expect(got.map((e) => e.name)).not.toContain('message_stop')
    expect(got.map((e) => e.name)).not.toContain('message_delta')
    const last = got.at(-1)!
    expect(last.name).toBe('error')
    const error = (last.data as { error: { type: string; code: string; costUsdc: string } }).error
    expect(error).toMatchObject({ type: 'api_error', code: 'stream_incomplete' })
    const after = await balances(stack, buyer.accountId)
    expect(parseMicros(error.costUsdc)).toBe(before.confirmed - after.confirmed)
    expect(after.held).toBe(0)
  })
})

test('silence is filled with ping events, and a stalled supplier ends with the error event', async () => {
  const local = await startStack({ env: { SVC_STREAM_IDLE_MS: '1000', SVC_KEEPALIVE_MS: '100' } })
  try {
    const sold = await simOffer(local, 40)
    const who = await fundedBuyer(local)
    await simKey(local, sold.upstreamKey, { fault: 'stall', times: 1 })
    const response = await messages({ ...ASK, stream: true }, { 'x-api-key': who.apiKey }, local)
    const text = await response.text()
    expect(text).not.toContain(': keep-alive')
    const got = events(text)
    // One ping after message_start, then at least one for the silence.
    expect(got.filter((e) => e.name === 'ping').length).toBeGreaterThan(1)
    expect(got.at(-1)!.data).toMatchObject({ type: 'error', error: { code: 'stream_incomplete' } })
    expect((await balances(local, who.accountId)).held).toBe(0)
  } finally {
    await local.stop()
  }
})

test('a clear its script refuses: no message_delta nor message_stop, the error event settle_failed, nothing charged', async () => {
  // The gateway reaches Redis through a proxy that answers the clear with an error in Redis's place
  // (on a Cluster, a proxy in front of the master that holds the stack's keys).
  const prefix = testPrefix()
  const target = new URL(await serverOf(testRedisUrl(), prefix))
  const proxy = startRedisProxy({ host: target.hostname, port: Number(target.port) })
  // The proxy answers a cued command's whole chunk: no reaper call may share the clear's write.
  const local = await startStack({
    prefix,
    env: { REDIS_URL: onTestDatabase(proxy.url), SVC_REAP_INTERVAL_MS: '60000' },
  })
  try {
    await simOffer(local, 40)
    const who = await fundedBuyer(local)
    const before = await balances(local, who.accountId)
    proxy.refuse(CLEAR, 'ERR user_script:1: refused')
    const response = await messages({ ...ASK, stream: true }, { 'x-api-key': who.apiKey }, local)
    const got = events(await response.text())
    const names = got.map((e) => e.name)
    expect(names).toContain('content_block_delta')
    expect(names).not.toContain('message_delta')
    expect(names).not.toContain('message_stop')
    expect(got.at(-1)!.data).toMatchObject({
      type: 'error',
      error: { type: 'api_error', code: 'settle_failed', supportReference: expect.stringMatching(/^sr_/) },
    })
    // Nothing spent: the hold stays until the reaper returns it, as for a clear that did not run.
    const after = await balances(local, who.accountId)
    expect(after.spent).toBe(before.spent)
    expect(after.confirmed + after.held).toBe(before.confirmed)
  } finally {
    await local.stop()
    proxy.stop()
  }
})

describe('the key', () => {
  test('x-api-key or Bearer: the same key, the same answer', async () => {
    const ways: Record<string, string>[] = [
      { 'x-api-key': buyer.apiKey },
      { authorization: `Bearer ${buyer.apiKey}` },
    ]
    for (const headers of ways) {
      const response = await messages(ASK, headers)
      expect(response.status).toBe(200)
      expect(((await response.json()) as { type: string }).type).toBe('message')
    }
  })

  test('refused in Anthropic shape: no key, a cookie beside a good key, two different keys', async () => {
    const other = await fundedBuyer(stack)
    const before = await moneyKeys()
    for (const [headers, code] of [
      [{}, 'missing_api_key'],
      [{ 'x-api-key': buyer.apiKey, cookie: 'session=1' }, 'cookies_not_accepted'],
      [{ 'x-api-key': buyer.apiKey, authorization: `Bearer ${other.apiKey}` }, 'invalid_api_key'],
      [{ 'x-api-key': `svc_${'0'.repeat(48)}` }, 'invalid_api_key'],
    ] as const) {
      for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
        const response = await fetch(`${stack.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify(ASK),
        })
        expect(response.status).toBe(401)
        const body = await response.json()
        expect(body).toMatchObject({ type: 'error', error: { type: 'authentication_error', code } })
      }
    }
    const after = await moneyKeys()
    for (const key of Object.keys(before)) expect(after[key]).toBe(before[key]!)
  })

  test("no key: the refusal names x-api-key, the header Anthropic's clients send, beside Bearer", async () => {
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      const response = await fetch(`${stack.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(ASK),
      })
      expect(response.status).toBe(401)
      const body = (await response.json()) as { error: { message: string } }
      expect(body.error.message).toContain('x-api-key')
      expect(body.error.message).toContain('Bearer')
    }
  })
})

describe('refusals', () => {
  test('what cannot be honoured is a 400 naming it, and nothing changes in Redis', async () => {
    const before = await moneyKeys()
    const cases: [Record<string, unknown>, string][] = [
      [{ ...ASK, max_tokens: undefined }, 'max_tokens'],
      [{ ...ASK, mcp_servers: [] }, 'mcp_servers'],
      [{ ...ASK, stream: true, container: 'c1' }, 'container'],
      [{ ...ASK, tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, 'web_search_20250305'],
      [{ ...ASK, messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] }, 'document'],
      [{ ...ASK, tool_choice: { type: 'sometimes' } }, 'tool_choice'],
      [{ ...ASK, tool_choice: { type: 'any' } }, 'needs tools'],
      [{ ...ASK, tool_choice: { type: 'tool', name: 'f' } }, 'needs tools'],
      [
        {
          ...ASK,
          tools: [{ name: 'f', input_schema: { type: 'object' } }],
          tool_choice: { type: 'tool', name: 'g' },
        },
        "the tool 'g'",
      ],
      [{ ...ASK, messages: [{ role: 'user', content: [] }] }, 'messages'],
      [
        { ...ASK, messages: [{ role: 'user', content: [{ type: 'text', text: 7 }] }] },
        'messages[0].content[0].text',
      ],
      [{ ...ASK, metadata: { tenant: 'x' } }, 'metadata.tenant'],
      [
        { ...ASK, tools: [{ name: 'f', input_schema: { type: 'object' }, input_examples: [{}] }] },
        'tools[0].input_examples',
      ],
      [{ ...ASK, messages: [{ role: 'user', content: 'hi', name: 'ann' }] }, 'messages[0].name'],
      [{ ...ASK, thinking: { type: 'enabled', budget_tokens: 1024 }, max_tokens: 2000 }, 'thinking'],
      [{ ...ASK, output_config: { effort: 'high' } }, 'output_config.effort'],
      [{ ...ASK, output_config: { format: { type: 'xml' } } }, 'output_config.format'],
      [
        { ...ASK, context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] } },
        'clear_tool_uses_20250919',
      ],
      // The catalog says llama-3.3-70b has no vision.
      [
        {
          ...ASK,
          messages: [
            {
              role: 'user',
              content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }],
            },
          ],
        },
        'image',
      ],
    ]
    for (const [body, named] of cases) {
      const response = await messages(body, { 'x-api-key': buyer.apiKey })
      expect(response.status).toBe(400)
      const refusal = (await response.json()) as { type: string; error: { type: string; message: string } }
      expect(refusal.type).toBe('error')
      expect(refusal.error.type).toBe('invalid_request_error')
      expect(refusal.error.message).toContain(named)
    }
    expect(await moneyKeys()).toEqual(before)
  })

  test('count_tokens refuses a context_management edit that would change the prompt, as /v1/messages does', async () => {
    const response = await fetch(`${stack.url}/v1/messages/count_tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': buyer.apiKey },
      body: JSON.stringify({
        model: 'llama-3.3-70b',
        messages: [{ role: 'user', content: 'hello' }],
        context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] },
      }),
    })
    expect(response.status).toBe(400)
    const refusal = (await response.json()) as { type: string; error: { type: string; message: string } }
    expect(refusal).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } })
    expect(refusal.error.message).toContain('clear_tool_uses_20250919')
  })

  test('a count not made in time is a 503 in Anthropic shape, not a 500', async () => {
    setTokenCountTimeoutMs(1)
    try {
      const response = await fetch(`${stack.url}/v1/messages/count_tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': buyer.apiKey },
        body: JSON.stringify({
          model: 'llama-3.3-70b',
          // No piece like another, so none is in the tokenizer's cache from an earlier count.
          messages: [
            { role: 'user', content: Array.from({ length: 80_000 }, (_, i) => i.toString(36)).join('') },
          ],
        }),
      })
      expect(response.status).toBe(503)
      expect(response.headers.get('retry-after')).toBe('1')
      expect(await response.json()).toMatchObject({ type: 'error', error: { code: 'count_unavailable' } })
    } finally {
      setTokenCountTimeoutMs(120_000)
    }
  })

  test('the model: bare or svc/ on both routes; unknown is not_found_error, not a text model invalid_request_error', async () => {
    const count = (body: Record<string, unknown>) =>
      fetch(`${stack.url}/v1/messages/count_tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': buyer.apiKey },
        body: JSON.stringify(body),
      })
    for (const model of ['llama-3.3-70b', 'svc/llama-3.3-70b']) {
      const answered = await messages({ ...ASK, model }, { 'x-api-key': buyer.apiKey })
      expect(answered.status).toBe(200)
      expect(await answered.json()).toMatchObject({ type: 'message', model: 'llama-3.3-70b' })
      const counted = await count({ model, messages: ASK.messages })
      expect(counted.status).toBe(200)
      expect(((await counted.json()) as { input_tokens: number }).input_tokens).toBeGreaterThan(0)
    }
    const before = await moneyKeys()
    for (const [model, status, type, code] of [
      ['no-such-model', 404, 'not_found_error', 'model_not_found'],
      ['flux-dev', 400, 'invalid_request_error', undefined],
    ] as const) {
      for (const response of [
        await messages({ ...ASK, model }, { 'x-api-key': buyer.apiKey }),
        await count({ model, messages: ASK.messages }),
      ]) {
        expect(response.status).toBe(status)
        const body = (await response.json()) as { type: string; error: { type: string; code: string } }
        expect(body).toMatchObject({ type: 'error', error: { type } })
        if (code) expect(body.error.code).toBe(code)
      }
    }
    expect(await moneyKeys()).toEqual(before)
  })

  test("503 as overloaded_error with the contract's hints; the buyer's max price is the remedy", async () => {
    const capped = await fundedBuyer(stack)
    const patched = await keyFetch(stack, capped.apiKey, '/v1/agent/max-price', {
      method: 'PATCH',
      json: { maxPriceCents: 30 },
    })
    expect(patched.status).toBe(200)
    const response = await messages(ASK, { 'x-api-key': capped.apiKey })
    expect(response.status).toBe(503)
    expect(response.headers.get('x-svc-error-code')).toBe('no_eligible_supply')
    expect(response.headers.get('x-svc-cheapest-posted-cents')).toBe('40')
    expect(response.headers.get('x-svc-buyer-max-cents')).toBe('30')
    expect(response.headers.get('x-svc-support-reference')).toMatch(/^sr_/)
    expect(await response.json()).toMatchObject({
      type: 'error',
      error: {
        type: 'overloaded_error',
        code: 'no_eligible_supply',
        buyerMaxCents: 30,
        cheapestPostedCents: 40,
      },
    })
    // Asked to stream, refused before any byte: the same JSON refusal, not an event stream.
    const streamed = await messages({ ...ASK, stream: true }, { 'x-api-key': capped.apiKey })
    expect(streamed.status).toBe(503)
    expect(streamed.headers.get('content-type')).toStartWith('application/json')
    expect(await streamed.json()).toMatchObject({
      type: 'error',
      error: { type: 'overloaded_error', code: 'no_eligible_supply' },
    })
  })

  test('429 with retry-after while the key has a completion in flight', async () => {
    const local = await startStack({
      sim: { holdFirstToken: true, outputTokens: 3 },
      env: { SVC_KEY_MAX_IN_FLIGHT: '1' },
    })
    try {
      await simOffer(local, 40)
      const who = await fundedBuyer(local)
      // A stream held at its first token until the test releases it: in flight from its hold on.
      const first = messages({ ...ASK, stream: true }, { 'x-api-key': who.apiKey }, local)
      await until(async () => (await balances(local, who.accountId)).held > 0, 5)
      const second = await messages(ASK, { 'x-api-key': who.apiKey }, local)
      expect(second.status).toBe(429)
      expect(second.headers.get('retry-after')).toBe('1')
      expect(await second.json()).toMatchObject({
        type: 'error',
        error: { type: 'rate_limit_error', code: 'key_concurrency_limit' },
      })
      local.sim.releaseFirstTokens()
      expect(
        (await (await first).text()).endsWith('event: message_stop\ndata: {"type":"message_stop"}\n\n'),
      ).toBe(true)
    } finally {
      await local.stop()
    }
  })

  test('near-miss bodies (right fields, wrong values): shaped 4xx, or served', async () => {
    const block = fc.oneof(
      fc.record({
        type: fc.constantFrom('text', 'image', 'tool_use', 'tool_result', 'x'),
        text: fc.string(),
      }),
      fc.jsonValue({ maxDepth: 2 }),
    )
    const near = fc.record(
      {
        model: fc.oneof(fc.constantFrom('llama-3.3-70b', 'svc/llama-3.3-70b', 'flux-dev', ''), fc.string()),
        max_tokens: fc.oneof(fc.integer({ min: -5, max: 20_000 }), fc.double(), fc.string()),
        messages: fc.oneof(
          fc.array(
            fc.record({
              role: fc.oneof(fc.constantFrom('user', 'assistant', 'system'), fc.integer()),
              content: fc.oneof(fc.string(), fc.array(block, { maxLength: 3 }), fc.constant(null)),
            }),
            { maxLength: 3 },
          ),
          fc.string(),
        ),
        system: fc.oneof(fc.string(), fc.array(block, { maxLength: 2 }), fc.integer()),
        tools: fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 2 }),
        tool_choice: fc.jsonValue({ maxDepth: 2 }),
        stop_sequences: fc.jsonValue({ maxDepth: 1 }),
        thinking: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: [] },
    )
    await fc.assert(
      fc.asyncProperty(near, async (body) => {
        const response = await messages(body, { 'x-api-key': buyer.apiKey })
        if (response.status === 200) {
          await response.arrayBuffer()
          return
        }
        await expectShapedRefusal(response.clone() as Response)
        expect(((await response.json()) as { type: string }).type).toBe('error')
      }),
      { numRuns: 150 },
    )
    expect((await balances(stack, buyer.accountId)).held).toBe(0)
  })
})

test('adaptive thinking on a model without reasoning is served: the model decides, and decides not to think', async () => {
  const response = await messages({ ...ASK, thinking: { type: 'adaptive' } }, { 'x-api-key': buyer.apiKey })
  expect(response.status).toBe(200)
  const message = (await response.json()) as { content: { type: string }[] }
  expect(message.content.map((block) => block.type)).toEqual(['text'])
})

test("Claude Code's request: a system message in messages, context_management, betas; served and counted", async () => {
  const instructions = { type: 'text', text: 'Today is Monday.', cache_control: { type: 'ephemeral' } }
  const prompt = {
    model: 'llama-3.3-70b',
    system: [{ type: 'text', text: 'You are an agent.', cache_control: { type: 'ephemeral' } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'hello' }] },
      { role: 'system', content: [instructions] },
    ],
  }
  const headers = { 'x-api-key': buyer.apiKey, 'anthropic-beta': 'context-management-2025-06-27' }
  const body = {
    ...prompt,
    max_tokens: 50,
    metadata: { user_id: JSON.stringify({ device_id: 'd'.repeat(64), session_id: 's' }) },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    stream: true,
  }
  const response = await fetch(`${stack.url}/v1/messages?beta=true`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
    body: JSON.stringify(body),
  })
  expect(response.status).toBe(200)
  expect(events(await response.text()).at(-1)!.name).toBe('message_stop')
  const counted = await fetch(`${stack.url}/v1/messages/count_tokens?beta=true`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(prompt),
  })
  expect(counted.status).toBe(200)
  const without = await fetch(`${stack.url}/v1/messages/count_tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ ...prompt, messages: prompt.messages.slice(0, 1) }),
  })
  const tokens = async (r: Response) => ((await r.json()) as { input_tokens: number }).input_tokens
  // The system message is prompt, counted as such.
  expect(await tokens(counted)).toBeGreaterThan(await tokens(without))
})

test('stop reasons: a stop sequence only when the supplier names one the request gave', () => {
  expect(stopReason({ finish_reason: 'stop' }, ['###'], false)).toEqual({
    stop_reason: 'end_turn',
    stop_sequence: null,
  })
  expect(stopReason({ finish_reason: 'stop', stop_reason: '###' }, ['###'], false)).toEqual({
    stop_reason: 'stop_sequence',
    stop_sequence: '###',
  })
  expect(stopReason({ finish_reason: 'stop', matched_stop: 2 }, ['###'], false).stop_reason).toBe('end_turn')
  expect(stopReason({ finish_reason: 'length' }, [], true).stop_reason).toBe('max_tokens')
  expect(stopReason({ finish_reason: 'stop' }, [], true).stop_reason).toBe('tool_use')
})

test('usage: prompt tokens billed as cache reads and writes are named so, the rest input_tokens', () => {
  expect(
    messagesUsage({ promptTokens: 100, completionTokens: 7, cachedTokens: 60, cacheWriteTokens: 15 }),
  ).toEqual({
    input_tokens: 25,
    output_tokens: 7,
    cache_creation_input_tokens: 15,
    cache_read_input_tokens: 60,
  })
  // Nothing billed from a cache: no cache field claimed.
  expect(messagesUsage({ promptTokens: 100, completionTokens: 7 })).toEqual({
    input_tokens: 100,
    output_tokens: 7,
    cache_creation_input_tokens: null,
    cache_read_input_tokens: null,
  })
})

test('image blocks on a model with vision: served as the chat call, held and charged like any prompt', async () => {
  // The simulated catalog has no vision model: llama-3.3-70b is given vision in Redis's catalog.
  const setVision = async (on: boolean) => {
    const entry = JSON.parse((await stack.store.hget(stack.keys.catalog, 'llama-3.3-70b'))!)
    entry.row.capabilities.supportsVision = on
    await stack.store.hset(stack.keys.catalog, 'llama-3.3-70b', JSON.stringify(entry))
    await until(async () => {
      const row = (await (await fetch(`${stack.url}/v1/models/llama-3.3-70b`)).json()) as {
        capabilities: { supportsVision: boolean }
      }
      return row.capabilities.supportsVision === on
    })
  }
  // An 8x8 PNG as far as its header: the size is all the hold reads of it.
  const header = Buffer.alloc(33)
  header.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13], 0)
  header.write('IHDR', 12)
  header.writeUInt32BE(8, 16)
  header.writeUInt32BE(8, 20)
  await setVision(true)
  try {
    const content = [
      { type: 'text', text: 'What is in these?' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: header.toString('base64') } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } },
    ]
    const withImages = { ...ASK, messages: [{ role: 'user', content }] }
    // The images reach the chat call: a balance that holds the text alone cannot hold them too
    // (an image of unknown size is held at the tokens of the largest).
    const poor = await fundedBuyer(stack, '0.001000')
    const short = await messages(withImages, { 'x-api-key': poor.apiKey })
    expect(short.status).toBe(402)
    expect(await short.json()).toMatchObject({ type: 'error', error: { type: 'billing_error' } })
    const textOnly = { ...ASK, messages: [{ role: 'user', content: content.slice(0, 1) }] }
    expect((await messages(textOnly, { 'x-api-key': poor.apiKey })).status).toBe(200)

    const before = await balances(stack, buyer.accountId)
    const response = await messages(withImages, { 'x-api-key': buyer.apiKey })
    expect(response.status).toBe(200)
    const message = (await response.json()) as {
      content: { type: string; text: string }[]
      usage: { input_tokens: number; output_tokens: number }
    }
    expect(message.content.map((b) => b.type)).toEqual(['text'])
    expect(message.usage.output_tokens).toBe(9)
    const after = await balances(stack, buyer.accountId)
    expect(parseMicros(response.headers.get('x-svc-cost-usdc')!)).toBe(before.confirmed - after.confirmed)
    expect(after.held).toBe(0)
  } finally {
    await setVision(false)
  }
})

describe('the same pipeline as chat', () => {
  const record = async (reference: string) => {
    const response = await keyFetch(stack, buyer.apiKey, `/v1/agent/requests/${reference}`)
    expect(response.status).toBe(200)
    return (await response.json()) as RequestView
  }

  test('fall-forward: the cheapest fails before any byte, the next serves at its ask; the record has both', async () => {
    const next = await simOffer(stack, 44)
    await simKey(stack, offer.upstreamKey, { fault: 'error_5xx', times: 1 })
    const before = await balances(stack, buyer.accountId)
    const response = await messages(ASK, { 'x-api-key': buyer.apiKey })
    expect(response.status).toBe(200)
    const message = (await response.json()) as { usage: { input_tokens: number; output_tokens: number } }
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('44')
    const usage = {
      prompt_tokens: message.usage.input_tokens,
      completion_tokens: message.usage.output_tokens,
    }
    const after = await balances(stack, buyer.accountId)
    expect(before.confirmed - after.confirmed).toBe(expectedCost(usage, 44))
    expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(expectedCost(usage, 44)))
    expect(after.held).toBe(0)
    const reference = response.headers.get('x-svc-support-reference')!
    const recorded = await record(reference)
    expect(recorded).toMatchObject({
      status: 'completed',
      model: 'llama-3.3-70b',
      costUsdc: response.headers.get('x-svc-cost-usdc'),
      clearingPriceCents: 44,
      usage: { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens, estimated: false },
    })
    expect(recorded.attempts.map((a) => [a.attempt, a.offerId, a.outcome])).toEqual([
      [1, offer.id, 'failed'],
      [2, next.id, 'completed'],
    ])
  })

  test('streamed: the record holds what message_delta said', async () => {
    const response = await messages({ ...ASK, stream: true }, { 'x-api-key': buyer.apiKey })
    const delta = events(await response.text()).find((e) => e.name === 'message_delta')!.data as {
      usage: { input_tokens: number; output_tokens: number }
      costUsdc: string
      clearingPriceCents: number
      supportReference: string
    }
    expect(await record(delta.supportReference)).toMatchObject({
      status: 'completed',
      costUsdc: delta.costUsdc,
      clearingPriceCents: delta.clearingPriceCents,
      usage: { inputTokens: delta.usage.input_tokens, outputTokens: delta.usage.output_tokens },
    })
  })
})

test('the audit finds nothing off', async () => {
  expect(await auditAll(stack.store, stack.keys)).toEqual([])
})
