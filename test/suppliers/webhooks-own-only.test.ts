// Another supplier's webhook endpoint, named by its real id, is a 404 on every supplier webhook
// route (change, remove, rotate, deliveries, replay) and changes nothing in Redis.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { keyFetch } from '../helpers/accounts.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack({ env: { SVC_WEBHOOK_ALLOW_LOOPBACK: '1' } })
})
afterAll(() => stack.stop())

test("another supplier's webhook endpoint is a 404 on every route, nothing changed", async () => {
  const owner = await signInSupplier(stack)
  const other = await signInSupplier(stack)
  const made = await keyFetch(stack, owner.apiKey, '/v1/supplier/webhooks', {
    method: 'POST',
    json: { url: 'http://127.0.0.1:9/hook', events: ['supplier.suspended'] },
  })
  expect(made.status).toBe(201)
  const { id } = (await made.json()) as { id: string }
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const calls: [string, string, unknown?][] = [
    ['PATCH', `/v1/supplier/webhooks/${id}`, { disabled: true }],
    ['DELETE', `/v1/supplier/webhooks/${id}`],
    ['POST', `/v1/supplier/webhooks/${id}/rotate-secret`, {}],
    ['GET', `/v1/supplier/webhooks/${id}/deliveries`],
    ['POST', `/v1/supplier/webhooks/${id}/deliveries/1-0/replay`],
  ]
  for (const [method, path, json] of calls) {
    const response = await keyFetch(stack, other.apiKey, path, { method, ...(json ? { json } : {}) })
    const body = (await response.json()) as { error?: { code?: string } }
    expect({ method, path, status: response.status, code: body.error?.code }).toEqual({
      method,
      path,
      status: 404,
      code: 'webhook_not_found',
    })
  }
  const listed = (await (await keyFetch(stack, other.apiKey, '/v1/supplier/webhooks')).json()) as {
    webhooks: unknown[]
  }
  expect(listed.webhooks).toEqual([])
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
})
