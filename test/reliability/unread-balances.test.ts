// A DIEM balance an upstream sends that cannot be read is no balance (never a wrong one), and the
// operator is told: svc_upstream_balances_unread_total counts each, by where it was sent (an
// answer's x-venice-balance-diem, or the key check's DIEM at an offer's post). Over real HTTP: the
// upstream is the simulated supplier behind a front of this file's own that tells odd balances.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { startSim } from '../../src/sim/server.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { metricValue } from '../helpers/metrics.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

const ANSWER = 'svc_upstream_balances_unread_total{where="answer"}'
const KEY_CHECK = 'svc_upstream_balances_unread_total{where="key_check"}'

const sim = startSim({ port: 0 })
/** Upstream keys the front tells an odd balance for: in the key check, and on every answer. */
const odd = new Set<string>()

const front = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: async (request) => {
    const url = new URL(request.url)
    const key = (request.headers.get('authorization') ?? '').replace(/^Bearer /, '')
    if (url.pathname.endsWith('/api_keys/rate_limits') && odd.has(key))
      return Response.json({ data: { balances: { DIEM: 'plenty', USD: 0 } } })
    const headers = new Headers(request.headers)
    headers.delete('host')
    const answer = await fetch(`${sim.url}${url.pathname}${url.search}`, {
      method: request.method,
      headers,
      body: request.method === 'GET' ? undefined : await request.text(),
      signal: request.signal,
    })
    const told = new Headers(answer.headers)
    if (odd.has(key)) told.set('x-venice-balance-diem', '1e3')
    return new Response(answer.body, { status: answer.status, headers: told })
  },
})

let stack: TestStack
let supplier: TestSupplier
let buyer: TestAccount
beforeAll(async () => {
  stack = await startStack({
    env: { SVC_UPSTREAM_URL: `http://127.0.0.1:${front.port}`, SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE: '1000' },
  })
  supplier = await signInSupplier(stack)
  buyer = await fundedBuyer(stack)
})
afterAll(async () => {
  await stack.stop()
  front.stop(true)
  await sim.stop()
})

async function post(key: string, askCents: number): Promise<{ upstreamBalanceDiem: string | null }> {
  const response = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: key, askCents, capacityDiem: '10' },
  })
  expect(response.status).toBe(201)
  return (await response.json()) as { upstreamBalanceDiem: string | null }
}

async function chat(stream: boolean): Promise<void> {
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', stream, messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 },
  })
  expect(response.status).toBe(200)
  await response.text()
}

test('balances read as sent are not counted; each one that cannot be read is, by where', async () => {
  const readable = `venice-${randomUUID()}`
  const before = { answer: await metricValue(stack, ANSWER), keyCheck: await metricValue(stack, KEY_CHECK) }

  // The simulated supplier's own balances, in the key check and on the answer: read, not counted.
  expect((await post(readable, 40)).upstreamBalanceDiem).not.toBeNull()
  await chat(false)
  expect(await metricValue(stack, KEY_CHECK)).toBe(before.keyCheck)
  expect(await metricValue(stack, ANSWER)).toBe(before.answer)

  // A cheaper key whose upstream tells its balance oddly: still posted, with no balance known.
  const told = `venice-${randomUUID()}`
  odd.add(told)
  expect((await post(told, 30)).upstreamBalanceDiem).toBeNull()
  expect(await metricValue(stack, KEY_CHECK)).toBe(before.keyCheck + 1)

  // Served by it, buffered and streamed: each answer's header counted once.
  await chat(false)
  await chat(true)
  expect(sim.keys.get(told).requests).toBe(2)
  expect(await metricValue(stack, ANSWER)).toBe(before.answer + 2)
  expect(await metricValue(stack, KEY_CHECK)).toBe(before.keyCheck + 1)
})
