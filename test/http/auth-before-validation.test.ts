// A caller without credentials (or with the wrong kind) gets its 401 before anything it sent
// is validated; a 400 that quotes a route's schema is for callers who may use the route.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack()
})
afterAll(() => stack.stop())

const LONG = 'x'.repeat(65)
const cases: [string, string][] = [
  ['GET', `/admin/v1/suppliers/${LONG}`],
  ['PATCH', `/admin/v1/suppliers/${LONG}`],
  ['GET', `/admin/v1/offers/${LONG}`],
  ['DELETE', `/admin/v1/offers/${LONG}`],
  ['GET', `/v1/supplier/offers/${LONG}`],
  ['DELETE', `/v1/supplier/offers/${LONG}`],
  ['GET', `/v1/supplier/payouts/${LONG}`],
]

for (const [method, path] of cases) {
  for (const authorization of [null, 'Bearer svc_wrongkind', 'Bearer not-the-admin-token']) {
    test(`${method} ${path.slice(0, 30)}… with ${authorization ?? 'no credentials'}: 401, not a 400`, async () => {
      const headers: Record<string, string> = { 'content-type': 'application/json' }
      if (authorization) headers.authorization = authorization
      const response = await fetch(`${stack.url}${path}`, {
        method,
        headers,
        ...(method === 'PATCH' ? { body: JSON.stringify({ status: 'suspended' }) } : {}),
      })
      expect(response.status).toBe(401)
    })
  }
}
