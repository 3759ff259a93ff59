// POST /v1/responses, the stateless facade: the openai SDK's responses.create and
// responses.stream() against the gateway, OpenAI's event order, cost on the final event.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { auditAll } from '../../src/cli/audit.ts'
import { formatMicros } from '../../src/money/units.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, type SimOffer, simKey, simOffer } from '../helpers/buyers.ts'
import { moneyAndMarketKeys, snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let client: OpenAI
let offer: SimOffer

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 9 } })
  offer = await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '5.000000')
  client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
})
afterAll(() => stack.stop())

function sseEvents(text: string) {
  return text
    .split('\n\n')
    .filter((frame) => frame.includes('data: '))
    .map((frame) => {
      const lines = frame.split('\n')
      const name = lines.find((l) => l.startsWith('event: '))?.slice(7)
      const data = JSON.parse(lines.find((l) => l.startsWith('data: '))!.slice(6)) as Record<string, unknown>
      return { name, data }
    })
}

function rawResponses(body: Record<string, unknown>) {
  return fetch(`${stack.url}/v1/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama-3.3-70b', input: 'hello', ...body }),
  })
}

describe('buffered', () => {
  test('responses.create gives a response object with output text, usage and the cost headers', async () => {
    const before = await balances(stack, buyer.accountId)
    const { data, response } = await client.responses
      .create({
        model: 'svc/llama-3.3-70b',
        input: 'Tell me about markets.',
        instructions: 'Be brief.',
        store: true,
      })
      .withResponse()
    expect(data.object).toBe('response')
    expect(data.status).toBe('completed')
    expect(data.id).toStartWith('resp_')
    expect(data.output_text.split(' ')).toHaveLength(9)
    expect(data.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed' })
    expect(data.usage!.output_tokens).toBe(9)
    expect(data.usage!.total_tokens).toBe(data.usage!.input_tokens + 9)
    const cost = expectedCost({ prompt_tokens: data.usage!.input_tokens, completion_tokens: 9 }, 40)
    expect(response.headers.get('x-svc-cost-usdc')).toBe(formatMicros(cost))
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('40')
    expect(response.headers.get('x-svc-support-reference')).toMatch(/^sr_/)
    expect(response.headers.get('x-svc-request-id')).toMatch(/^req_[0-9a-f]{24}$/)
    expect((await balances(stack, buyer.accountId)).confirmed).toBe(before.confirmed - cost)
  })

  test('an input array of message items with content parts, and max_output_tokens', async () => {
    const data = await client.responses.create({
      model: 'llama-3.3-70b',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'first' }] },
        { role: 'assistant', content: 'an answer' },
        { type: 'message', role: 'user', content: 'second' },
      ],
      max_output_tokens: 4,
    })
    expect(data.usage!.output_tokens).toBe(4)
  })
})

describe('streamed', () => {
  test("only OpenAI's response.* events, in order, numbered, event line equal to type", async () => {
    const response = await rawResponses({ stream: true })
    expect(response.headers.get('content-type')).toStartWith('text/event-stream')
    const text = await response.text()
    expect(text).not.toContain('[DONE]')
    expect(text).not.toContain('svc.cost')
    const events = sseEvents(text)
    for (const e of events) expect(e.name).toBe(e.data.type as string)
    expect(events.map((e) => e.data.sequence_number)).toEqual(events.map((_, i) => i))
    const types = events.map((e) => e.name)
    expect(types.slice(0, 4)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
    ])
    expect(types.filter((t) => t === 'response.output_text.delta')).toHaveLength(9)
    expect(types.slice(-4)).toEqual([
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ])
    const completed = events.at(-1)!.data as {
      response: {
        status: string
        usage: { input_tokens: number; output_tokens: number; total_tokens: number }
      }
      costUsdc: string
      clearingPriceCents: number
      supportReference: string
    }
    expect(completed.response.status).toBe('completed')
    expect(completed.response.usage.output_tokens).toBe(9)
    expect(completed.clearingPriceCents).toBe(40)
    expect(completed.supportReference).toBe(response.headers.get('x-svc-support-reference')!)
    expect(response.headers.get('x-svc-request-id')).toMatch(/^req_[0-9a-f]{24}$/)
    expect(completed.costUsdc).toBe(
      formatMicros(
        expectedCost({ prompt_tokens: completed.response.usage.input_tokens, completion_tokens: 9 }, 40),
      ),
    )
  })

  test('the SDK stream iterator and responses.stream() helper both finish', async () => {
    const stream = await client.responses.create({ model: 'llama-3.3-70b', input: 'hi', stream: true })
    const seen: string[] = []
    for await (const e of stream) seen.push(e.type)
    expect(seen.at(-1)).toBe('response.completed')

    const runner = client.responses.stream({ model: 'llama-3.3-70b', input: 'hi' })
    let deltas = ''
    runner.on('response.output_text.delta', (e) => {
      deltas += e.delta
    })
    const final = await runner.finalResponse()
    expect(final.output_text).toBe(deltas)
    expect(final.status).toBe('completed')
  })

  test('a truncated stream: response.incomplete with cost and no usage key', async () => {
    await simKey(stack, offer.upstreamKey, { fault: 'truncate', times: 1 })
    const before = await balances(stack, buyer.accountId)
    const events = sseEvents(await (await rawResponses({ stream: true })).text())
    const last = events.at(-1)!.data as { type: string; response: Record<string, unknown>; costUsdc: string }
    expect(last.type).toBe('response.incomplete')
    expect(last.response.status).toBe('incomplete')
    expect('usage' in last.response).toBe(false)
    expect(events.some((e) => e.name === 'response.completed')).toBe(false)
    const charged = before.confirmed - (await balances(stack, buyer.accountId)).confirmed
    expect(formatMicros(charged)).toBe(last.costUsdc)
    expect(charged).toBeGreaterThan(0)
  })
})

describe('not stored, and bad input', () => {
  test('GET /v1/responses and GET /v1/responses/{id}: 404', async () => {
    for (const path of ['/v1/responses', '/v1/responses/resp_123']) {
      const response = await fetch(`${stack.url}${path}`, {
        headers: { authorization: `Bearer ${buyer.apiKey}` },
      })
      expect(response.status).toBe(404)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('not_found')
    }
  })

  for (const [why, body] of [
    ['no input', { input: undefined }],
    ['an empty input', { input: '' }],
    [
      'an unsupported content part',
      { input: [{ role: 'user', content: [{ type: 'input_audio', data: 'x' }] }] },
    ],
    [
      'a function_call item without its call_id',
      { input: [{ type: 'function_call', name: 'f', arguments: '{}' }] },
    ],
    ['max_output_tokens as a string', { max_output_tokens: '5' }],
  ] as [string, Record<string, unknown>][]) {
    test(`${why}: 400, nothing changes in Redis`, async () => {
      const before = await snapshotKeys(stack.store, stack.keys.prefix)
      const response = await rawResponses(body)
      expect(response.status).toBe(400)
      expect(((await response.json()) as { error: { type: string } }).error.type).toBe(
        'invalid_request_error',
      )
      const after = await snapshotKeys(stack.store, stack.keys.prefix)
      // lastUsedAt of the key may be written once a minute; the money and market keys must not move
      expect(moneyAndMarketKeys(after)).toEqual(moneyAndMarketKeys(before))
    })
  }

  test('the audit finds nothing off', async () => {
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
