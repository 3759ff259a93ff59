// GET /v1/supplier/events and /v1/agent/events: the owner's recent events from its stream, newest
// first, paged like the other lists, each with its endpoints' delivery state; a hostile query
// string is a 400 in the error shape that changes nothing.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { adminFetch, createAccount, keyFetch, waitForLastUsed } from '../helpers/accounts.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'
import { registerWebhook, startReceiver, startWebhookStack } from './helpers.ts'

let stack: TestStack
let supplier: TestSupplier
const receiver = startReceiver()
beforeAll(async () => {
  stack = await startWebhookStack()
  supplier = await signInSupplier(stack)
})
afterAll(async () => {
  await stack.stop()
  await receiver.stop()
})

interface Listed {
  object: 'list'
  nextCursor: string | null
  data: {
    id: string
    type: string
    at: string
    data: Record<string, unknown>
    deliveries: {
      endpointId: string
      state: string
      reason: string | null
      attempt: number | null
      httpStatus: number | null
      error: string | null
      at: string | null
    }[]
  }[]
}

const events = async (query = '') => {
  const response = await keyFetch(stack, supplier.apiKey, `/v1/supplier/events${query}`)
  expect(response.status).toBe(200)
  return (await response.json()) as Listed
}

test("the supplier's events, newest first, with each endpoint's delivery state, a page at a time", async () => {
  const created = await registerWebhook(stack, supplier.apiKey, '/v1/supplier', {
    url: receiver.url,
    events: ['supplier.suspended', 'supplier.reinstated'],
  })
  const endpoint = (await created.json()) as { id: string }
  for (const status of ['suspended', 'active']) {
    const response = await adminFetch(stack, `/admin/v1/suppliers/${supplier.supplierId}`, {
      method: 'PATCH',
      json: { status },
    })
    expect(response.status).toBe(200)
  }
  await until(async () => (await events()).data.every((e) => e.deliveries[0]?.state === 'delivered'))

  const all = await events()
  expect(all.nextCursor).toBeNull()
  expect(all.data.map((e) => e.type)).toEqual(['supplier.reinstated', 'supplier.suspended'])
  // The ids are those the deliveries carried, in the order written (the list is newest first).
  expect(all.data.map((e) => e.id).reverse()).toEqual(receiver.unique().map((r) => r.id))
  for (const event of all.data) {
    expect(event.data).toMatchObject({ supplierId: supplier.supplierId })
    expect(Date.parse(event.at)).toBeGreaterThan(Date.now() - 60_000)
    expect(event.deliveries).toEqual([
      {
        endpointId: endpoint.id,
        state: 'delivered',
        reason: null,
        attempt: 1,
        httpStatus: 200,
        error: null,
        at: expect.any(String),
      },
    ])
  }

  const first = await events('?limit=1')
  expect(first.data.map((e) => e.id)).toEqual([all.data[0]!.id])
  expect(first.nextCursor).not.toBeNull()
  const second = await events(`?limit=1&before=${first.nextCursor}`)
  expect(second.data.map((e) => e.id)).toEqual([all.data[1]!.id])
  expect(second.nextCursor).toBeNull()
})

test('an account with no events gets an empty list; each key reads only its own kind of owner', async () => {
  const buyer = await createAccount(stack)
  const response = await keyFetch(stack, buyer.apiKey, '/v1/agent/events')
  expect(response.status).toBe(200)
  expect(await response.json()).toEqual({ object: 'list', data: [], nextCursor: null })
  expect((await keyFetch(stack, buyer.apiKey, '/v1/supplier/events')).status).toBe(401)
  expect((await keyFetch(stack, supplier.apiKey, '/v1/agent/events')).status).toBe(401)
})

test('a hostile query string is a 400 in the error shape and changes nothing', async () => {
  const buyer = await createAccount(stack)
  await waitForLastUsed(stack, buyer.apiKey) // a key's first use is written once, not by these calls
  // The reinstated event may have flagged the supplier again while the suspended one was sent: the
  // consumer's next pass takes that flag, so wait for it rather than catch it mid-way.
  await until(async () => (await stack.store.scard(stack.keys.webhookDueOfPrefix)) === 0)
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const hostile: [string, string][] = [
    ['?limit=0', 'invalid_limit'],
    ['?limit=201', 'invalid_limit'],
    ['?limit=-1', 'invalid_limit'],
    ['?limit=1e2', 'invalid_limit'],
    ['?limit=%00', 'invalid_limit'],
    ['?before=nope', 'invalid_cursor'],
    ['?before=%2B', 'invalid_cursor'],
    ['?before=(1-1', 'invalid_cursor'],
    [`?before=${'9'.repeat(40)}-0`, 'invalid_cursor'],
  ]
  for (const [query, code] of hostile) {
    for (const [path, apiKey] of [
      ['/v1/supplier/events', supplier.apiKey],
      ['/v1/agent/events', buyer.apiKey],
    ] as const) {
      const response = await keyFetch(stack, apiKey, `${path}${query}`)
      expect({ query, status: response.status }).toEqual({ query, status: 400 })
      const body = (await response.json()) as { error: { code: string; message: string } }
      expect(body.error.code).toBe(code)
      expect(typeof body.error.message).toBe('string')
    }
  }
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  // A cursor below which no entry can be is an empty page, not a 500.
  for (const [path, apiKey] of [
    ['/v1/supplier/events', supplier.apiKey],
    ['/v1/agent/events', buyer.apiKey],
  ] as const) {
    const response = await keyFetch(stack, apiKey, `${path}?before=00-0`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ object: 'list', data: [], nextCursor: null })
  }
})
