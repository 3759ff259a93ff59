// Limits over real HTTP: the per-key and per-wallet in-flight caps, the bounded wait for a busy
// supplier key, and many concurrent paid requests from one balance.
import { afterAll, describe, expect, test } from 'bun:test'
import { auditAll } from '../../src/cli/audit.ts'
import type { GatewayConfig } from '../../src/config.ts'
import { createLogger } from '../../src/logger.ts'
import { formatMicros } from '../../src/money/units.ts'
import { keyFetch, logCapture } from '../helpers/accounts.ts'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const stacks: TestStack[] = []
afterAll(async () => {
  for (const s of stacks) await s.stop()
})

const body = { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] }

/** Once the account's first request holds money, it is admitted and in flight. */
const inFlight = (stack: TestStack, accountId: string) =>
  until(async () => (await balances(stack, accountId)).held > 0)

/**
 * A stack whose supplier holds every stream's first token until the test releases it: a request in
 * flight for as long as the test needs, however slowly the machine runs.
 */
async function heldStack(
  env: Record<string, string> = {},
  more: { tune?: (config: GatewayConfig) => void; logs?: ReturnType<typeof logCapture> } = {},
) {
  const stack = await startStack({
    sim: { holdFirstToken: true, outputTokens: 3 },
    env,
    tune: more.tune,
    logger: more.logs && createLogger('debug', 'svc-test', more.logs.stream),
  })
  stacks.push(stack)
  return stack
}

/** A key wait's clock that stands still until the test moves it: no wait ends on its own. */
function stillClock() {
  let now = Date.now()
  return {
    read: () => now,
    pass: (ms: number) => {
      now += ms
    },
  }
}

describe('in-flight caps', () => {
  test('a second completion on the same key: 429 key_concurrency_limit with Retry-After: 1', async () => {
    const stack = await heldStack({ SVC_KEY_MAX_IN_FLIGHT: '1' })
    await simOffer(stack, 40)
    const buyer = await fundedBuyer(stack)
    const first = keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { ...body, stream: true },
    })
    await inFlight(stack, buyer.accountId)
    const second = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', { method: 'POST', json: body })
    expect(second.status).toBe(429)
    expect(second.headers.get('retry-after')).toBe('1')
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('key_concurrency_limit')
    stack.sim.releaseFirstTokens()
    expect((await (await first).text()).endsWith('data: [DONE]\n\n')).toBe(true)
    // once the first is done, the key may call again
    expect(
      (await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', { method: 'POST', json: body })).status,
    ).toBe(200)
  })

  test('another key of the same wallet past the wallet cap: 429 buyer_concurrency_limit', async () => {
    const stack = await heldStack({ SVC_WALLET_MAX_IN_FLIGHT: '1' })
    await simOffer(stack, 40)
    const buyer = await fundedBuyer(stack)
    const minted = await keyFetch(stack, buyer.apiKey, '/v1/agent/keys', {
      method: 'POST',
      json: { name: 'second' },
    })
    const otherKey = ((await minted.json()) as { apiKey: string }).apiKey
    const first = keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { ...body, stream: true },
    })
    await inFlight(stack, buyer.accountId)
    const second = await keyFetch(stack, otherKey, '/v1/chat/completions', { method: 'POST', json: body })
    expect(second.status).toBe(429)
    expect(second.headers.get('retry-after')).toBe('1')
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('buyer_concurrency_limit')
    stack.sim.releaseFirstTokens()
    await (await first).text()
  })

  test('every eligible supplier key busy past the wait: 503 key_wait_timeout; nothing charged', async () => {
    // The first stream holds the only key until it leaves: the wait below ends before it does.
    const stack = await heldStack({ SVC_KEY_WAIT_MS: '100' })
    await simOffer(stack, 40, { maxInFlight: 1 })
    const a = await fundedBuyer(stack)
    const b = await fundedBuyer(stack)
    const leave = new AbortController()
    const first = keyFetch(stack, a.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { ...body, stream: true },
      signal: leave.signal,
    })
    await inFlight(stack, a.accountId)
    const before = await balances(stack, b.accountId)
    const second = await keyFetch(stack, b.apiKey, '/v1/chat/completions', { method: 'POST', json: body })
    expect(second.status).toBe(503)
    expect(second.headers.get('x-svc-error-code')).toBe('key_wait_timeout')
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('key_wait_timeout')
    expect(await balances(stack, b.accountId)).toEqual(before)
    leave.abort()
    await first.catch(() => {})
  })

  test('requests waiting for a busy key count against the wallet cap: the rest are 429 at once', async () => {
    // The first stream holds the only key until it leaves, and the waits' clock stands still: the
    // first three wait until the test moves it, however slowly a busy machine lets the rest arrive.
    const clock = stillClock()
    const stack = await heldStack(
      { SVC_KEY_WAIT_MS: '3000', SVC_WALLET_MAX_IN_FLIGHT: '3' },
      {
        tune: (config) => {
          config.market.keyWaitClock = clock.read
        },
      },
    )
    await simOffer(stack, 40, { maxInFlight: 1 })
    const a = await fundedBuyer(stack)
    const b = await fundedBuyer(stack)
    const leave = new AbortController()
    const first = keyFetch(stack, a.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { ...body, stream: true },
      signal: leave.signal,
    })
    await inFlight(stack, a.accountId)
    const answered: { status: number; code: string }[] = []
    const all = Promise.all(
      Array.from({ length: 7 }, () =>
        keyFetch(stack, b.apiKey, '/v1/chat/completions', { method: 'POST', json: body }).then(async (r) => {
          answered.push({
            status: r.status,
            code: ((await r.json()) as { error: { code: string } }).error.code,
          })
        }),
      ),
    )
    // Three may wait (the wallet's cap); the other four are refused without waiting.
    await until(() => answered.length >= 4)
    expect(answered).toEqual(Array(4).fill({ status: 429, code: 'buyer_concurrency_limit' }))
    // Their wait over, the three waiting are answered that the key stayed busy.
    clock.pass(3_000)
    await all
    expect(answered.slice(4)).toEqual(Array(3).fill({ status: 503, code: 'key_wait_timeout' }))
    leave.abort()
    await first.catch(() => {})
  })

  test('a request waiting for a busy key is served once the key frees up within its wait', async () => {
    // The wait's clock stands still: the second request waits for the key, however long it takes.
    const logs = logCapture()
    const clock = stillClock()
    const stack = await heldStack(
      { SVC_KEY_WAIT_MS: '5000' },
      {
        logs,
        tune: (config) => {
          config.market.keyWaitClock = clock.read
        },
      },
    )
    await simOffer(stack, 40, { maxInFlight: 1 })
    const a = await fundedBuyer(stack)
    const b = await fundedBuyer(stack)
    // A stream holds the key until the test releases its first token and the rest have gone out.
    const first = keyFetch(stack, a.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { ...body, stream: true },
    })
    await inFlight(stack, a.accountId)
    const second = keyFetch(stack, b.apiKey, '/v1/chat/completions', { method: 'POST', json: body })
    await until(() => logs.lines.some((line) => line.includes('waiting for a busy supplier key')))
    stack.sim.releaseFirstTokens()
    expect((await second).status).toBe(200)
    const streamed = await first
    expect(streamed.status).toBe(200)
    expect(await streamed.text()).toContain('data: [DONE]')
  })
})

describe('concurrency', () => {
  test('60 concurrent paid requests, buffered and streamed: every cost charged once, audit clean', async () => {
    const stack = await startStack({
      sim: { outputTokens: 5 },
      env: { SVC_KEY_MAX_IN_FLIGHT: '100', SVC_WALLET_MAX_IN_FLIGHT: '100' },
    })
    stacks.push(stack)
    await simOffer(stack, 35, { maxInFlight: 20 })
    await simOffer(stack, 45, { maxInFlight: 20 })
    await simOffer(stack, 50, { maxInFlight: 20 })
    const buyer = await fundedBuyer(stack, '3.000000')
    const before = await balances(stack, buyer.accountId)
    const costs = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const stream = i % 2 === 1
        const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
          method: 'POST',
          json: { ...body, stream },
        })
        expect(response.status).toBe(200)
        if (!stream) {
          await response.arrayBuffer()
          return response.headers.get('x-svc-cost-usdc')!
        }
        const text = await response.text()
        const frame = text.split('\n\n').find((f) => f.includes('"svc.cost"'))!
        return (JSON.parse(frame.slice(6)) as { costUsdc: string }).costUsdc
      }),
    )
    const total = costs.reduce((sum, c) => sum + Number(c.replace('.', '')), 0)
    const after = await balances(stack, buyer.accountId)
    expect(formatMicros(before.confirmed - after.confirmed)).toBe(formatMicros(total))
    expect(after.held).toBe(0)
    expect(await auditAll(stack.store, stack.keys)).toEqual([])
  })
})
