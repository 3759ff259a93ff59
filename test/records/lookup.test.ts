// GET /v1/agent/requests/{support_reference} end to end: a real gateway, the simulated supplier, a
// real Redis. Each request is resolvable, complete, as soon as its response has arrived (the
// script that ends an attempt writes its record), by the account that made it only, and never
// shows a supplier's identity, URL or key.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { formatMicros } from '../../src/money/units.ts'
import type { RequestView } from '../../src/records/lookup.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { expectedCost, fundedBuyer, type SimOffer, simKey, simOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let other: TestAccount
let cheapest: SimOffer
let second: SimOffer

beforeAll(async () => {
  // No cool-down, so a supplier made to fail is tried again by the next test.
  stack = await startStack({ sim: { outputTokens: 7 }, env: { SVC_OFFER_COOLDOWN_MS: '0' } })
  cheapest = await simOffer(stack, 36)
  second = await simOffer(stack, 44)
  buyer = await fundedBuyer(stack)
  other = await fundedBuyer(stack)
})
afterAll(() => stack.stop())

const messages = [{ role: 'user' as const, content: 'Where did my request go?' }]

function chat(body: Record<string, unknown>, apiKey = buyer.apiKey) {
  return fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama-3.3-70b', messages, ...body }),
  })
}

function get(reference: string, apiKey = buyer.apiKey) {
  return fetch(`${stack.url}/v1/agent/requests/${reference}`, {
    headers: { authorization: `Bearer ${apiKey}` },
  })
}

/** The record, complete, asked for right after the response arrived. */
async function lookup(reference: string, apiKey = buyer.apiKey): Promise<RequestView> {
  const response = await get(reference, apiKey)
  const text = await response.text()
  expect(response.status).toBe(200)
  // never a supplier's identity, URL or key
  expect(text).not.toContain(stack.sim.url)
  expect(text).not.toContain(cheapest.upstreamKey)
  expect(text).not.toContain(second.upstreamKey)
  const view = JSON.parse(text) as RequestView
  expect(view.complete).toBe(true)
  return view
}

describe('lookup after a request', () => {
  test('buffered: cost, clearing price, usage and the one attempt, as the response said', async () => {
    const client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
    const { data, response } = await client.chat.completions
      .create({ model: 'svc/llama-3.3-70b', messages })
      .withResponse()
    const reference = response.headers.get('x-svc-support-reference')!
    const record = await lookup(reference)
    expect(record).toMatchObject({
      object: 'request',
      supportReference: reference,
      requestId: response.headers.get('x-svc-request-id'),
      model: 'llama-3.3-70b',
      status: 'completed',
      complete: true,
      errorCode: null,
      costUsdc: response.headers.get('x-svc-cost-usdc'),
      clearingPriceCents: 36,
      usage: {
        inputTokens: data.usage!.prompt_tokens,
        outputTokens: data.usage!.completion_tokens,
        totalTokens: data.usage!.prompt_tokens + data.usage!.completion_tokens,
        estimated: false,
      },
    })
    expect(record.costUsdc).toBe(formatMicros(expectedCost(data.usage!, 36)))
    expect(record.attempts).toEqual([
      {
        attempt: 1,
        offerId: cheapest.id,
        outcome: 'completed',
        errorCode: null,
        clearingPriceCents: 36,
        costUsdc: record.costUsdc,
        startedAt: expect.any(String),
        endedAt: expect.any(String),
      },
    ])
    expect(Date.parse(record.createdAt!)).toBeLessThanOrEqual(Date.parse(record.endedAt!))
  })

  test('streamed: the record carries what the svc.cost frame said', async () => {
    const response = await chat({ stream: true, stream_options: { include_usage: true } })
    const frames = sseData(await response.text())
    const cost = frames.at(-2) as { costUsdc: string; clearingPriceCents: number; supportReference: string }
    const usage = (frames.at(-3) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage
    expect(cost.supportReference).toBe(response.headers.get('x-svc-support-reference')!)
    const record = await lookup(cost.supportReference)
    expect(record).toMatchObject({
      status: 'completed',
      costUsdc: cost.costUsdc,
      clearingPriceCents: cost.clearingPriceCents,
      usage: { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens, estimated: false },
    })
    expect(record.attempts).toHaveLength(1)
  })

  test('failed: a 502 after fall-forward shows every attempt, its error and no cost', async () => {
    await simKey(stack, cheapest.upstreamKey, { fault: 'error_5xx', times: 1 })
    await simKey(stack, second.upstreamKey, { fault: 'error_5xx', times: 1 })
    const response = await chat({})
    expect(response.status).toBe(502)
    const reference = response.headers.get('x-svc-support-reference')!
    const body = (await response.json()) as { error: { code: string; supportReference: string } }
    expect(body.error.supportReference).toBe(reference)
    const record = await lookup(reference)
    expect(record).toMatchObject({
      status: 'failed',
      costUsdc: '0.000000',
      clearingPriceCents: null,
      usage: null,
    })
    // both offers failed before any byte; a third admission found nothing left to try
    expect(record.errorCode).toBe('provider_error')
    expect(record.attempts.map((a) => [a.attempt, a.offerId, a.outcome, a.costUsdc])).toEqual([
      [1, cheapest.id, 'failed', '0.000000'],
      [2, second.id, 'failed', '0.000000'],
      [3, null, 'refused', '0.000000'],
    ])
    for (const a of record.attempts.slice(0, 2)) expect(a.errorCode).toStartWith('upstream_')
  })

  test('failed five times: the fifth supplier key is the last attempt, and the record is complete', async () => {
    const more = [await simOffer(stack, 46), await simOffer(stack, 47), await simOffer(stack, 48)]
    const all = [cheapest, second, ...more]
    for (const offer of all) await simKey(stack, offer.upstreamKey, { fault: 'error_5xx', times: 1 })
    const response = await chat({})
    expect(response.status).toBe(502)
    const record = await lookup(response.headers.get('x-svc-support-reference')!)
    expect(record.status).toBe('failed')
    expect(record.attempts.map((a) => [a.offerId, a.outcome])).toEqual(all.map((o) => [o.id, 'failed']))
  })

  test('503: the refusal is a recorded attempt; its reference is in the header and the body', async () => {
    const low = await fundedBuyer(stack)
    const patched = await fetch(`${stack.url}/v1/agent/max-price`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${low.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ maxPriceCents: 30 }),
    })
    expect(patched.status).toBe(200)
    const response = await chat({}, low.apiKey)
    expect(response.status).toBe(503)
    const reference = response.headers.get('x-svc-support-reference')!
    expect(reference).toMatch(/^sr_[a-z2-7]{20}$/)
    const body = (await response.json()) as { error: { code: string; supportReference: string } }
    expect(body.error).toMatchObject({ code: 'no_eligible_supply', supportReference: reference })
    expect(response.headers.get('x-svc-cheapest-posted-cents')).toBe('36')

    expect((await get(reference, buyer.apiKey)).status).toBe(404) // not the owner
    expect(await lookup(reference, low.apiKey)).toMatchObject({
      status: 'refused',
      errorCode: 'no_eligible_supply',
      costUsdc: '0.000000',
      usage: null,
      attempts: [{ attempt: 1, offerId: null, outcome: 'refused', errorCode: 'no_eligible_supply' }],
    })
  })
})

describe('other refusals at admission are recorded too', () => {
  test('402 on chat and 503 on the Responses API carry a reference that resolves to the refusal', async () => {
    const poor = await fundedBuyer(stack, '0.000100')
    const refused = await chat({ max_tokens: 4_000 }, poor.apiKey)
    expect(refused.status).toBe(402)
    const low = await fundedBuyer(stack)
    await fetch(`${stack.url}/v1/agent/max-price`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${low.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ maxPriceCents: 30 }),
    })
    const responses = await fetch(`${stack.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${low.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'llama-3.3-70b', input: 'hello' }),
    })
    expect(responses.status).toBe(503)
    for (const [response, who, code] of [
      [refused, poor, 'insufficient_balance'],
      [responses, low, 'no_eligible_supply'],
    ] as const) {
      const reference = response.headers.get('x-svc-support-reference')!
      expect(reference).toMatch(/^sr_/)
      expect(
        ((await response.json()) as { error: { supportReference: string } }).error.supportReference,
      ).toBe(reference)
      expect(await lookup(reference, who.apiKey)).toMatchObject({
        status: 'refused',
        errorCode: code,
        costUsdc: '0.000000',
      })
    }
  })
})

describe('who may look', () => {
  test("404 in the error shape for an unknown, a malformed or another account's reference", async () => {
    const response = await chat({})
    const reference = response.headers.get('x-svc-support-reference')!
    await lookup(reference)
    for (const [path, key] of [
      [reference, other.apiKey],
      ['sr_aaaaaaaaaaaaaaaaaaaa', buyer.apiKey],
      ['not-a-reference', buyer.apiKey],
      [`${reference}.1`, buyer.apiKey],
      ['sr_AAAAAAAAAAAAAAAAAAAA', buyer.apiKey],
    ] as const) {
      const miss = await get(path, key)
      expect(miss.status).toBe(404)
      expect(((await miss.json()) as { error: { code: string; type: string } }).error).toMatchObject({
        code: 'request_not_found',
        type: 'not_found_error',
      })
    }
    expect((await fetch(`${stack.url}/v1/agent/requests/${reference}`)).status).toBe(401)
  })
})
