// The DIEM balance the upstream tells when it vouches for a supplier's key is the offer's balance
// known for that UTC day: a key with nothing left stands on the ladder but takes no request (the
// next offer serves it, the key never asked), one with less than its posted capacity is routable
// only to its balance, and a balance told oddly still vouches for the key and is no balance.
// Over real HTTP: the upstream is a simulated supplier behind a front that tells odd balances.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { startSim } from '../../src/sim/server.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let supplier: TestSupplier
let buyer: TestAccount

// Its own, started before the gateway, which lists the models through the front as it starts.
const sim = startSim({ port: 0 })
/** Keys whose balance the front tells as this raw JSON, in place of the simulated supplier's. */
const told = new Map<string, string>()

const front = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: async (request) => {
    const url = new URL(request.url)
    const key = (request.headers.get('authorization') ?? '').replace(/^Bearer /, '')
    const raw = told.get(key)
    if (url.pathname.endsWith('/api_keys/rate_limits') && raw !== undefined) {
      return new Response(`{"data":{"balances":{"DIEM":${raw},"USD":0}}}`, {
        headers: { 'content-type': 'application/json' },
      })
    }
    const headers = new Headers(request.headers)
    headers.delete('host')
    const answer = await fetch(`${sim.url}${url.pathname}${url.search}`, {
      method: request.method,
      headers,
      body: request.method === 'GET' ? undefined : await request.text(),
      signal: request.signal,
    })
    return new Response(answer.body, { status: answer.status, headers: answer.headers })
  },
})

beforeAll(async () => {
  stack = await startStack({
    env: {
      SVC_UPSTREAM_URL: `http://127.0.0.1:${front.port}`,
      // One supplier posts every offer of this file within a minute: its key checks are not what is tested.
      SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE: '1000',
    },
  })
  supplier = await signInSupplier(stack)
  buyer = await fundedBuyer(stack)
})
afterAll(async () => {
  await stack.stop()
  front.stop(true)
  await sim.stop()
})

const upstreamKey = () => `venice-${randomUUID()}`

interface Posted {
  id: string
  capacityDiem: string
  upstreamBalanceDiem: string | null
}

async function post(key: string, askCents: number, capacityDiem: string): Promise<Posted> {
  const response = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: key, askCents, capacityDiem },
  })
  expect(response.status).toBe(201)
  return (await response.json()) as Posted
}

async function listed(id: string): Promise<Posted | undefined> {
  const response = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers')
  expect(response.status).toBe(200)
  return ((await response.json()) as { data: Posted[] }).data.find((o) => o.id === id)
}

describe("the key check's balance", () => {
  test('a key with 0 DIEM left today: posted and shown so, never sent a request; the next offer serves the buyer', async () => {
    const empty = upstreamKey()
    sim.keys.get(empty).balanceMicroDiem = 0
    const zero = await post(empty, 30, '10')
    expect(zero.upstreamBalanceDiem).toBe('0.000000')
    expect((await listed(zero.id))?.upstreamBalanceDiem).toBe('0.000000')
    const dearer = upstreamKey()
    await post(dearer, 45, '10')

    const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hello' }], max_tokens: 16 },
    })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-svc-clearing-price-cents')).toBe('45')
    expect(sim.keys.get(empty).requests).toBe(0)
    expect(sim.keys.get(dearer).requests).toBe(1)
  })

  test('a key told below its posted capacity: routable only to its balance', async () => {
    const key = upstreamKey()
    sim.keys.get(key).balanceMicroDiem = 2_500_000
    const offer = await post(key, 31, '10')
    expect(offer).toMatchObject({ capacityDiem: '10.000000', upstreamBalanceDiem: '2.500000' })
    // A max price no earlier read asked for: a snapshot made now, not one cached before the post.
    const capacity = (await (await fetch(`${stack.url}/v1/capacity?maxPriceCents=31`)).json()) as {
      prices: { priceCentsPerDollar: number; routableDiem: string }[]
    }
    expect(capacity.prices.find((p) => p.priceCentsPerDollar === 31)?.routableDiem).toBe('2.500000')
  })

  test('a balance told as a decimal string is the same amount', async () => {
    const key = upstreamKey()
    told.set(key, '"7.25"')
    expect((await post(key, 70, '10')).upstreamBalanceDiem).toBe('7.250000')
  })

  test('a balance told finer than a micro-DIEM is rounded down, never up', async () => {
    const cases: [string, string][] = [
      ['0.1234567', '0.123456'],
      ['"99.9998519"', '99.999851'],
      ['0.3', '0.300000'],
    ]
    for (const [raw, shown] of cases) {
      const key = upstreamKey()
      told.set(key, raw)
      expect({ raw, balance: (await post(key, 72, '10')).upstreamBalanceDiem }).toEqual({
        raw,
        balance: shown,
      })
    }
  })

  test('a balance told oddly still vouches for the key: posted, with no balance known', async () => {
    for (const raw of ['"abc"', '-1', '1e400', '1e20', '1e-7', 'null', 'true', '{}', '"-0.5"']) {
      const key = upstreamKey()
      told.set(key, raw)
      const offer = await post(key, 75, '10')
      expect({ raw, balance: offer.upstreamBalanceDiem }).toEqual({ raw, balance: null })
      expect(await stack.store.hmget(stack.keys.offer(offer.id), 'balance', 'balanceDay')).toEqual(['', ''])
      expect(await stack.store.zscore(stack.keys.ladder, offer.id)).not.toBeNull()
    }
  })
})
