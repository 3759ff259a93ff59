// Every fault of the simulated supplier, through the gateway: the contract's outcome and the exact
// balance change (nothing for a failure before any byte; an estimate for a stream cut short).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import { formatMicros } from '../../src/money/units.ts'
import { dayOf } from '../../src/records/days.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
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
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let first: SimOffer

beforeAll(async () => {
  stack = await startStack({
    sim: { outputTokens: 8, slowFirstByteMs: 2_000 },
    env: {
      // Limits a healthy local supplier meets on a busy machine, and the 2 s slow first byte does not.
      SVC_FIRST_BYTE_TIMEOUT_MS: '1000',
      SVC_UPSTREAM_TIMEOUT_MS: '1500', // a buffered call slower than this falls forward
      SVC_STREAM_IDLE_MS: '1000',
      SVC_KEEPALIVE_MS: '100',
      SVC_OFFER_COOLDOWN_MS: '0',
      SVC_DEFAULT_MAX_TOKENS: '5',
    },
  })
  first = await simOffer(stack, 33)
  await simOffer(stack, 48) // the backup every failure falls forward to
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(() => stack.stop())

const chat = (extra: Record<string, unknown> = {}) =>
  keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, ...extra },
  })

async function servedAt(
  response: Response,
): Promise<{ ask: number; usage: { prompt_tokens: number; completion_tokens: number } }> {
  expect(response.status).toBe(200)
  const body = (await response.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }
  return { ask: Number(response.headers.get('x-svc-clearing-price-cents')), usage: body.usage }
}

describe('failures before any byte fall forward and cost nothing', () => {
  for (const fault of ['error_5xx', 'rate_limit', 'out_of_balance', 'slow_first_byte']) {
    for (const stream of [false, true]) {
      test(`${fault}, ${stream ? 'streamed' : 'buffered'}: served by the next offer, charged only there`, async () => {
        // A fresh start for the cheap offer: an earlier out_of_balance left it marked empty for the day.
        await stack.store.hset(stack.keys.offer(first.id), 'balance', '')
        const tried = await simKey(stack, first.upstreamKey, { fault, times: 1, balanceDiem: '100' })
        const before = await balances(stack, buyer.accountId)
        const response = await chat({ stream })
        expect(response.status).toBe(200)
        let charged: number
        if (stream) {
          const frames = sseData(await response.text())
          expect(frames.at(-1)).toBe('[DONE]')
          const cost = frames.at(-2) as { clearingPriceCents: number; costUsdc: string }
          expect(cost.clearingPriceCents).toBe(48)
          charged = Number(cost.costUsdc.replace('.', ''))
        } else {
          const { ask, usage } = await servedAt(response)
          expect(ask).toBe(48)
          charged = expectedCost(usage, 48)
        }
        const after = await balances(stack, buyer.accountId)
        expect(before.confirmed - after.confirmed).toBe(charged)
        expect(after.held).toBe(0)
        // the cheap offer really was tried first, and failed
        expect((await simKeyState(stack, first.upstreamKey)).requests).toBe(tried.requests + 1)
      })
    }
  }

  test('out_of_balance records the supplier key as empty: the offer has no routable capacity left today', async () => {
    await simKey(stack, first.upstreamKey, { fault: 'out_of_balance', times: 1 })
    await servedAt(await chat())
    // Empty for the UTC day it was learned on: the allocation resets at 00:00 UTC.
    expect(await stack.store.hmget(stack.keys.offer(first.id), 'balance', 'balanceDay')).toEqual([
      '0',
      String(dayOf(Date.now())),
    ])
    // and so the next request goes straight to the backup, without trying the empty key
    const { ask } = await servedAt(await chat())
    expect(ask).toBe(48)
    await stack.store.hset(stack.keys.offer(first.id), 'balance', '')
  })
})

describe('failures after bytes are billed on estimate', () => {
  test('a stalled stream is given up on after the idle time: keep-alives, then stream_incomplete', async () => {
    await stack.store.hset(stack.keys.offer(first.id), 'balance', '')
    await simKey(stack, first.upstreamKey, { fault: 'stall', times: 1 })
    const before = await balances(stack, buyer.accountId)
    const response = await chat({ stream: true })
    const text = await response.text()
    expect(text).toContain(': keep-alive')
    const frames = sseData(text)
    expect(frames).not.toContain('[DONE]')
    expect((frames.at(-1) as { error: { code: string } }).error.code).toBe('stream_incomplete')
    const cost = frames.at(-2) as { object: string; costUsdc: string; clearingPriceCents: number }
    expect(cost.object).toBe('svc.cost')
    expect(cost.clearingPriceCents).toBe(33)
    const after = await balances(stack, buyer.accountId)
    expect(formatMicros(before.confirmed - after.confirmed)).toBe(cost.costUsdc)
    expect(after.held).toBe(0)
  })
})

describe('admitted limits reach the supplier', () => {
  test('with no max_tokens, the default admitted cap is what the supplier is asked for', async () => {
    const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hello' }] },
    })
    const body = (await response.json()) as {
      usage: { completion_tokens: number }
      choices: { finish_reason: string }[]
    }
    expect(body.usage.completion_tokens).toBe(5) // SVC_DEFAULT_MAX_TOKENS, though the supplier would say 8
    expect(body.choices[0]!.finish_reason).toBe('length')
  })

  test('the audit finds nothing off', async () => {
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
