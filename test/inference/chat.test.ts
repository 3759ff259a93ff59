// POST /v1/chat/completions end to end: the official openai SDK as the client, the simulated
// supplier upstream, a real Redis, and the exact balance change down to the micro-USDC.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { countTokens } from 'gpt-tokenizer'
import OpenAI from 'openai'
import { auditAll } from '../../src/cli/audit.ts'
import { formatMicros } from '../../src/money/units.ts'
import { promptTokens as simPromptTokens } from '../../src/sim/generate.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import {
  balances,
  expectedCost,
  fundedBuyer,
  type SimOffer,
  simKey,
  simKeyState,
  simOffer,
  sseData,
} from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyer: TestAccount
let client: OpenAI
let cheapest: SimOffer
let second: SimOffer

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 12 } })
  cheapest = await simOffer(stack, 36)
  second = await simOffer(stack, 44)
  buyer = await fundedBuyer(stack, '10.000000')
  client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
})
afterAll(() => stack.stop())

const messages = [{ role: 'user' as const, content: 'Say something about markets.' }]

function rawChat(
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
  apiKey = buyer.apiKey,
  signal?: AbortSignal,
) {
  return fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'svc/llama-3.3-70b', messages, ...body }),
    signal,
  })
}

describe('buffered chat', () => {
  test('the SDK gets a chat completion; cost headers equal the exact balance change', async () => {
    const before = await balances(stack, buyer.accountId)
    const { data, response } = await client.chat.completions
      .create({ model: 'svc/llama-3.3-70b', messages })
      .withResponse()
    expect(data.object).toBe('chat.completion')
    expect(data.model).toBe('llama-3.3-70b')
    expect(data.choices[0]!.message.content!.split(' ')).toHaveLength(12)
    expect(data.usage!.completion_tokens).toBe(12)
    expect(response.headers.get('x-svc-request-id')).toMatch(/^req_/)
    expect(response.headers.get('x-svc-support-reference')).toMatch(/^sr_[a-z2-7]{20}$/)
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('36')
    const cost = expectedCost(data.usage!, 36)
    expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(cost))
    const after = await balances(stack, buyer.accountId)
    expect(after.confirmed).toBe(before.confirmed - cost)
    expect(after.spent).toBe(before.spent + cost)
    expect(after.held).toBe(0)
    expect(response.headers.get('x-balance-remaining')).toBe(formatMicros(after.confirmed))
    expect((data as unknown as Record<string, unknown>).cost).toBeUndefined()
  })

  test('fall-forward: the cheapest supplier fails before any byte, the next one serves at its ask', async () => {
    await simKey(stack, cheapest.upstreamKey, { fault: 'error_5xx', times: 1 })
    const before = await balances(stack, buyer.accountId)
    const { data, response } = await client.chat.completions
      .create({ model: 'llama-3.3-70b', messages })
      .withResponse()
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('44')
    const cost = expectedCost(data.usage!, 44)
    expect((await balances(stack, buyer.accountId)).confirmed).toBe(before.confirmed - cost)
    // the failed supplier cools down: the next request goes to the 44-cent offer too
    const next = await client.chat.completions.create({ model: 'llama-3.3-70b', messages }).withResponse()
    expect(next.response.headers.get('x-svc-clearing-price-cents')).toBe('44')
  })

  test('every supplier failing gives 502 with a support reference, and costs nothing', async () => {
    const local = await startStack()
    try {
      const offers = await Promise.all([30, 31, 32, 33, 34, 35].map((ask) => simOffer(local, ask)))
      for (const o of offers) await simKey(local, o.upstreamKey, { fault: 'rate_limit' })
      const who = await fundedBuyer(local, '1.000000')
      const before = await balances(local, who.accountId)
      const response = await fetch(`${local.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${who.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'llama-3.3-70b', messages }),
      })
      expect(response.status).toBe(502)
      expect(response.headers.get('x-svc-support-reference')).toMatch(/^sr_/)
      const body = (await response.json()) as { error: { code: string; supportReference: string } }
      expect(body.error.code).toBe('provider_error')
      expect(body.error.supportReference).toBe(response.headers.get('x-svc-support-reference')!)
      expect(await balances(local, who.accountId)).toEqual(before)
      const tried = await Promise.all(offers.map((o) => simKeyState(local, o.upstreamKey)))
      expect(tried.map((t) => t.requests)).toEqual([1, 1, 1, 1, 1, 0]) // five keys, then give up
      expect(await auditAll(local.store, local.keys)).toEqual([])
    } finally {
      await local.stop()
    }
  })

  test('a buffered answer cut off mid-body falls forward too; the buyer pays once', async () => {
    await simKey(stack, second.upstreamKey, { fault: 'truncate', times: 1 })
    await simKey(stack, cheapest.upstreamKey, { fault: 'error_5xx', times: 1 })
    const third = await simOffer(stack, 47)
    const before = await balances(stack, buyer.accountId)
    const { data, response } = await client.chat.completions
      .create({ model: 'llama-3.3-70b', messages })
      .withResponse()
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('47')
    expect((await balances(stack, buyer.accountId)).confirmed).toBe(
      before.confirmed - expectedCost(data.usage!, 47),
    )
    await fetch(`${stack.url}/admin/v1/offers/${third.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${stack.config.adminToken}` },
    })
  })
})

// The fall-forward tests above leave offers cooling down; the stream tests start from a warm ladder.
async function warmLadder() {
  for (const id of await stack.store.smembers(stack.keys.offers)) {
    await stack.store.hset(stack.keys.offer(id), 'cooldownUntil', 0)
  }
}

describe('streamed chat', () => {
  beforeAll(warmLadder)
  test('the SDK iterator sees content, the usage chunk and the svc.cost frame; [DONE] ends it', async () => {
    const before = await balances(stack, buyer.accountId)
    const stream = await client.chat.completions.create({
      model: 'svc/llama-3.3-70b',
      messages,
      stream: true,
    })
    const chunks: Record<string, unknown>[] = []
    for await (const chunk of stream) chunks.push(chunk as unknown as Record<string, unknown>)
    const text = chunks
      .flatMap((c) => (c.choices as { delta?: { content?: string } }[]) ?? [])
      .map((c) => c.delta?.content ?? '')
      .join('')
    expect(text.split(' ')).toHaveLength(12)
    const usage = chunks.at(-2) as {
      usage: { prompt_tokens: number; completion_tokens: number }
      choices: unknown[]
    }
    expect(usage.choices).toEqual([])
    const cost = chunks.at(-1) as {
      object: string
      choices: unknown[]
      costUsdc: string
      clearingPriceCents: number
      supportReference: string
    }
    expect(cost.object).toBe('svc.cost')
    expect(cost.choices).toEqual([])
    expect(cost.supportReference).toMatch(/^sr_/)
    const ask = cost.clearingPriceCents
    expect(cost.costUsdc).toBe(formatMicros(expectedCost(usage.usage, ask)))
    expect((await balances(stack, buyer.accountId)).confirmed).toBe(
      before.confirmed - expectedCost(usage.usage, ask),
    )
  })

  test('the SDK stream() helper survives the cost frame and assembles the completion', async () => {
    const runner = client.chat.completions.stream({ model: 'llama-3.3-70b', messages })
    const completion = await runner.finalChatCompletion()
    expect(completion.choices[0]!.message.content!.split(' ')).toHaveLength(12)
  })

  test('raw SSE: head without cost headers, usage then svc.cost then [DONE], in that order', async () => {
    const response = await rawChat({ stream: true })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toStartWith('text/event-stream')
    expect(response.headers.get('x-svc-support-reference')).toMatch(/^sr_/)
    expect(response.headers.get('x-svc-request-id')).toMatch(/^req_/)
    expect(response.headers.get('x-svc-cost-usdc')).toBeNull()
    expect(response.headers.get('x-balance-remaining')).toBeNull()
    const text = await response.text()
    // Each frame is its data line and one blank line: no empty events between them.
    expect(text).not.toContain('\n\n\n')
    const frames = sseData(text)
    expect(frames.at(-1)).toBe('[DONE]')
    expect((frames.at(-2) as { object: string }).object).toBe('svc.cost')
    expect((frames.at(-3) as { usage: unknown }).usage).toBeDefined()
    expect((frames.at(-2) as { supportReference: string }).supportReference).toBe(
      response.headers.get('x-svc-support-reference')!,
    )
  })

  test('a stream cut off upstream: estimated usage billed, cost frame, stream_incomplete, no [DONE]', async () => {
    await warmLadder()
    await simKey(stack, cheapest.upstreamKey, { fault: 'truncate', times: 1 }) // after 6 of 12 tokens
    const before = await balances(stack, buyer.accountId)
    const response = await rawChat({ stream: true })
    const frames = sseData(await response.text())
    expect(frames).not.toContain('[DONE]')
    const error = frames.at(-1) as { error: { code: string } }
    expect(error.error.code).toBe('stream_incomplete')
    const cost = frames.at(-2) as { object: string; costUsdc: string; clearingPriceCents: number }
    expect(cost.object).toBe('svc.cost')
    expect(frames.some((f) => typeof f === 'object' && 'usage' in f)).toBe(false)
    const charged = before.confirmed - (await balances(stack, buyer.accountId)).confirmed
    expect(formatMicros(charged)).toBe(cost.costUsdc)
    expect(charged).toBeGreaterThan(0)
    // 6 tokens out of 12 were generated: the estimate bills the prompt and those 6, not 12
    const full = expectedCost({ prompt_tokens: 20, completion_tokens: 12 }, cost.clearingPriceCents)
    expect(charged).toBeLessThan(full)
    const attempt = stack.keys.attempt(
      `${(frames.at(-2) as { supportReference: string }).supportReference}.1`,
    )
    const { estimated, inputTokens, outputTokens } = await attemptRecord(stack.store, attempt)
    expect(estimated).toBe('1')
    // The estimate is the real tokenizer's count of what was relayed, and of the prompt
    const relayed = frames
      .map((f) => (f as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content ?? '')
      .join('')
    expect(relayed.split(' ')).toHaveLength(6)
    expect(Number(outputTokens)).toBe(countTokens(relayed))
    expect(Number(inputTokens)).toBe(3 + 4 + countTokens(messages[0]!.content))
  })

  test('a special token spelled in the prompt is counted as text: the cut stream is still billed', async () => {
    await warmLadder()
    await simKey(stack, cheapest.upstreamKey, { fault: 'truncate', times: 1 })
    const before = await balances(stack, buyer.accountId)
    const response = await rawChat({
      stream: true,
      messages: [{ role: 'user', content: 'Repeat <|endoftext|> and <|im_start|> back to me.' }],
    })
    const frames = sseData(await response.text())
    expect((frames.at(-1) as { error: { code: string } }).error.code).toBe('stream_incomplete')
    const cost = frames.at(-2) as { object: string; costUsdc: string }
    expect(cost.object).toBe('svc.cost')
    const charged = before.confirmed - (await balances(stack, buyer.accountId)).confirmed
    expect(charged).toBeGreaterThan(0)
    expect(formatMicros(charged)).toBe(cost.costUsdc)
  })

  test('a client that leaves mid-stream: the supplier call ends at once, only what was generated is billed', async () => {
    const who = await fundedBuyer(stack, '2.000000')
    const before = await balances(stack, who.accountId)
    await warmLadder()
    await simKey(stack, cheapest.upstreamKey, { fault: 'stall', times: 1 }) // silent after 6 of 12 tokens
    const keyBefore = await simKeyState(stack, cheapest.upstreamKey)
    const controller = new AbortController()
    const response = await rawChat({ stream: true }, {}, who.apiKey, controller.signal)
    const reader = response.body!.getReader()
    let seen = ''
    while ((seen.match(/"content":"[^"]/g) ?? []).length < 6)
      seen += new TextDecoder().decode((await reader.read()).value)
    controller.abort()
    // settlement is asynchronous to the disconnect: wait for the hold to come back
    await until(async () => (await balances(stack, who.accountId)).held === 0, 20)
    const after = await balances(stack, who.accountId)
    const charged = before.confirmed - after.confirmed
    expect(charged).toBeGreaterThan(0)
    expect(charged).toBe(after.spent - before.spent)
    // the supplier saw its stream cancelled: the gateway did not leave it running
    expect((await simKeyState(stack, cheapest.upstreamKey)).cancelledStreams).toBe(
      keyBefore.cancelledStreams + 1,
    )
    // billed: the prompt and the 6 generated tokens, estimated; not the 12 a full answer has
    expect(charged).toBeLessThan(expectedCost({ prompt_tokens: 20, completion_tokens: 12 }, 36))
  })
})

describe('refusals', () => {
  test('402 without accepts when the confirmed balance cannot cover the worst case; nothing moves', async () => {
    const poor = await fundedBuyer(stack, '0.000100')
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const response = await rawChat({ max_tokens: 4000 }, {}, poor.apiKey)
    expect(response.status).toBe(402)
    const body = (await response.json()) as { error: { code: string }; accepts?: unknown }
    expect(body.error.code).toBe('insufficient_balance')
    expect(body.accepts).toBeUndefined()
    const after = await snapshotKeys(stack.store, stack.keys.prefix)
    expect(after[stack.keys.account(poor.accountId)]).toBe(before[stack.keys.account(poor.accountId)])
  })

  test('503 no_eligible_supply with its hint headers when supply is only above the buyer max', async () => {
    const local = await startStack()
    try {
      await simOffer(local, 65)
      const who = await fundedBuyer(local)
      const response = await fetch(`${local.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${who.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'llama-3.3-70b', messages }),
      })
      expect(response.status).toBe(503)
      expect(response.headers.get('x-svc-error-code')).toBe('no_eligible_supply')
      expect(response.headers.get('x-svc-buyer-max-cents')).toBe('50')
      expect(response.headers.get('x-svc-cheapest-posted-cents')).toBe('65')
      const body = (await response.json()) as { error: Record<string, unknown> }
      expect(body.error).toMatchObject({
        code: 'no_eligible_supply',
        buyerMaxCents: 50,
        cheapestPostedCents: 65,
        routableDiemAboveMax: '50.000000',
      })
      // the contract's remedy: set the max price to cheapestPostedCents, and the same request clears
      const patched = await fetch(`${local.url}/v1/agent/max-price`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${who.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ maxPriceCents: 65 }),
      })
      expect(patched.status).toBe(200)
      const retried = await fetch(`${local.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${who.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'llama-3.3-70b', messages }),
      })
      expect(retried.status).toBe(200)
    } finally {
      await local.stop()
    }
  })

  const bad: [string, Record<string, unknown>, number, string][] = [
    ['an unknown model', { model: 'no-such-model' }, 404, 'model_not_found'],
    ['a coming_soon model', { model: 'deepseek-r2-preview' }, 400, 'model_not_live'],
    ['an image model', { model: 'svc/flux-dev' }, 400, 'model_not_text'],
    ['no messages', { messages: undefined }, 400, 'invalid_request'],
    ['empty messages', { messages: [] }, 400, 'invalid_request'],
    ['a message without a role', { messages: [{ content: 'x' }] }, 400, 'invalid_request'],
    ['max_tokens as a string', { max_tokens: '10' }, 400, 'invalid_request'],
    ['max_tokens zero', { max_tokens: 0 }, 400, 'invalid_request'],
    ['max_tokens above the model limit', { max_tokens: 9_000 }, 400, 'max_tokens_too_large'],
    ['stream as a string', { stream: 'yes' }, 400, 'invalid_request'],
    // The upstream charges these beyond tokens; the buyer is billed tokens only.
    ['web search on', { venice_parameters: { enable_web_search: 'on' } }, 400, 'unsupported_parameter'],
    ['web search auto', { venice_parameters: { enable_web_search: 'auto' } }, 400, 'unsupported_parameter'],
    ['web scraping on', { venice_parameters: { enable_web_scraping: true } }, 400, 'unsupported_parameter'],
    ['a character', { venice_parameters: { character_slug: 'alan-watts' } }, 400, 'unsupported_parameter'],
    [
      "the upstream's own system prompt",
      { venice_parameters: { include_venice_system_prompt: true } },
      400,
      'unsupported_parameter',
    ],
    [
      'an unknown venice parameter',
      { venice_parameters: { enable_x_search: true } },
      400,
      'unsupported_parameter',
    ],
    ['venice_parameters not an object', { venice_parameters: 'on' }, 400, 'unsupported_parameter'],
    ['web_search_options', { web_search_options: {} }, 400, 'unsupported_parameter'],
    ['a server tool', { tools: [{ type: 'web_search' }] }, 400, 'unsupported_parameter'],
  ]
  for (const [why, body, status, code] of bad) {
    test(`${why}: ${status} ${code}, nothing changes in Redis`, async () => {
      const before = await snapshotKeys(stack.store, stack.keys.prefix)
      const response = await rawChat(body)
      expect(response.status).toBe(status)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe(code)
      const after = await snapshotKeys(stack.store, stack.keys.prefix)
      delete before[
        stack.keys.apiKey((await import('../../src/accounts/api-keys.ts')).digestApiKey(buyer.apiKey))
      ]
      delete after[
        stack.keys.apiKey((await import('../../src/accounts/api-keys.ts')).digestApiKey(buyer.apiKey))
      ]
      expect(after).toEqual(before)
    })
  }

  test('upstream parameters billed by their tokens alone pass through, web search named off among them', async () => {
    const response = await rawChat({
      venice_parameters: {
        enable_web_search: 'off',
        enable_web_scraping: false,
        disable_thinking: true,
        include_venice_system_prompt: false,
      },
      web_search_options: null,
      tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
    })
    expect(response.status).toBe(200)
    expect(((await response.json()) as { object: string }).object).toBe('chat.completion')
  })

  test("the upstream's own system prompt is turned off: the prompt billed is the one sent, within its hold", async () => {
    const response = await rawChat({})
    expect(response.status).toBe(200)
    const body = (await response.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }
    expect(body.usage.prompt_tokens).toBe(simPromptTokens(messages))
    expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(expectedCost(body.usage, 36)))
  })

  test('a body that is not JSON: 400', async () => {
    const response = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
      body: '{"model": "llama-3.3-70b", "messages": [',
    })
    expect(response.status).toBe(400)
  })

  test('a revoked key: 401 from the admission itself, nothing held; a live key is marked used', async () => {
    const minted = await fetch(`${stack.url}/v1/agent/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'short-lived' }),
    })
    const key = (await minted.json()) as { apiKey: string; id: string }
    const used = await rawChat({}, {}, key.apiKey)
    expect(used.status).toBe(200)
    const { digestApiKey } = await import('../../src/accounts/api-keys.ts')
    expect(
      Number(await stack.store.hget(stack.keys.apiKey(digestApiKey(key.apiKey)), 'lastUsedAt')),
    ).toBeGreaterThan(0)
    await fetch(`${stack.url}/v1/agent/keys/${key.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${buyer.apiKey}` },
    })
    const before = await balances(stack, buyer.accountId)
    const response = await rawChat({}, {}, key.apiKey)
    expect(response.status).toBe(401)
    expect(response.headers.get('www-authenticate')).toBe('Bearer')
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_api_key')
    expect(await balances(stack, buyer.accountId)).toEqual(before)
  })

  test('no key: 401', async () => {
    const response = await fetch(`${stack.url}/v1/chat/completions`, { method: 'POST', body: '{}' })
    expect(response.status).toBe(401)
  })

  test('after everything, the audit finds nothing off', async () => {
    // Settlements end after their responses: once no lease is left, every attempt has ended.
    await until(async () => (await stack.store.zcard(stack.keys.leases)) === 0)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
