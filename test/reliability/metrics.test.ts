// GET /metrics: Prometheus text behind the operator token, counting what happened.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { keyFetch } from '../helpers/accounts.ts'
import { fundedBuyer, simKey, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack()
})
afterAll(() => stack.stop())

const scrape = async () => {
  const response = await fetch(`${stack.url}/metrics`, {
    headers: { authorization: `Bearer ${stack.config.adminToken}` },
  })
  expect(response.status).toBe(200)
  expect(response.headers.get('content-type')).toStartWith('text/plain')
  return response.text()
}

function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line ? Number(line.slice(series.length + 1)) : 0
}

test('requests by route template and status, latency, clears, fall-forwards, gauges', async () => {
  const first = await simOffer(stack, 40)
  await simOffer(stack, 45)
  const buyer = await fundedBuyer(stack)
  const before = await scrape()
  await simKey(stack, first.upstreamKey, { fault: 'error_5xx', times: 1 })
  const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] },
  })
  expect(chat.status).toBe(200)
  await fetch(`${stack.url}/v1/models/no-such-model`)
  const ok = 'svc_http_requests_total{method="POST",route="/v1/chat/completions",status="200"}'
  const notFound = 'svc_http_requests_total{method="GET",route="/v1/models/*",status="404"}'
  const clears = 'svc_clears_total{usage="metered"}'
  // A request is counted after its response is sent: wait until both are.
  let after = ''
  await until(async () => {
    after = await scrape()
    return value(after, ok) > value(before, ok) && value(after, notFound) >= 1
  })

  expect(value(after, ok) - value(before, ok)).toBe(1)
  // a 404 is counted under its route template, not the raw path
  expect(value(after, notFound)).toBeGreaterThanOrEqual(1)
  expect(after).not.toContain('no-such-model')
  expect(value(after, clears) - value(before, clears)).toBe(1)
  const ff = 'svc_fall_forwards_total{code="upstream_503"}'
  expect(value(after, ff) - value(before, ff)).toBe(1)
  expect(after).toContain('svc_http_request_duration_seconds_bucket{route="/v1/chat/completions",le="+Inf"}')
  expect(value(after, 'svc_holds_outstanding')).toBe(0)
  expect(after).toMatch(/^svc_unsent_clears 0$/m)
  expect(value(after, 'svc_redis_ping_seconds')).toBeGreaterThan(0)
})

test('holds outstanding count the leases of both record shapes: packed, and from a gateway before them', async () => {
  await stack.store.zadd(stack.keys.leases, Date.now() + 60_000, 'sr_gauge.1')
  await stack.store.zadd(
    stack.keys.earlierLeases,
    Date.now() + 60_000,
    'sr_gauge.2',
    Date.now() + 60_000,
    'sr_gauge.3',
  )
  try {
    expect(value(await scrape(), 'svc_holds_outstanding')).toBe(3)
  } finally {
    await stack.store.call('ZREM', stack.keys.leases, 'sr_gauge.1')
    await stack.store.call('ZREM', stack.keys.earlierLeases, 'sr_gauge.2', 'sr_gauge.3')
  }
})

test('without the operator token: 401', async () => {
  expect((await fetch(`${stack.url}/metrics`)).status).toBe(401)
})
