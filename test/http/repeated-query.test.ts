// A query parameter the contract declares as one value, given twice, is a 400 naming it on every
// route that declares one (read from /openapi.json itself, so a route added later is covered); a
// list parameter (lifecycle[]) may repeat, and a caller who may not use the route still gets its 401.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createAccount, type TestAccount } from '../helpers/accounts.ts'
import { credentialOf, type Operation, operationsOf } from '../helpers/hostile-cases.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let buyer: TestAccount
let supplier: TestSupplier
let operations: Operation[]

beforeAll(async () => {
  stack = await startStack()
  buyer = await createAccount(stack)
  supplier = await signInSupplier(stack)
  const document = (await (await fetch(`${stack.url}/openapi.json`)).json()) as Parameters<
    typeof operationsOf
  >[0]
  operations = operationsOf(document).filter((op) => op.method === 'GET')
})
afterAll(() => stack.stop())

/** A value each parameter takes, so that giving it twice is the only thing wrong. */
function validValue(op: Operation, name: string): string {
  const values: Record<string, string> = {
    limit: '1',
    window: '7d',
    maxPriceCents: '40',
    wallet: buyer.wallet,
    state: 'pending',
    after_id: 'llama-3.3-70b',
    before_id: 'llama-3.3-70b',
    before: op.path === '/v1/supplier/payouts' ? `po_${'0'.repeat(24)}` : '1-0',
  }
  const value = values[name]
  if (value === undefined) throw new Error(`${op.method} ${op.path}: no valid value known for ?${name}`)
  return value
}

const credential = (op: Operation) =>
  credentialOf(op, { admin: stack.config.adminToken, buyer: buyer.apiKey, supplier: supplier.apiKey })

const scalarQuery = (op: Operation) =>
  op.parameters.filter((p) => p.in === 'query' && (p.schema as { type?: string }).type !== 'array')

test('every scalar query parameter given twice is a 400 naming it, and nothing changes', async () => {
  const found: string[] = []
  let checked = 0
  for (const op of operations) {
    if (op.path.includes('{')) continue
    const dialect = op.parameters.some((p) => p.in === 'header' && p.name === 'anthropic-version')
    const headers = { ...credential(op), ...(dialect ? { 'anthropic-version': '2023-06-01' } : {}) }
    for (const param of scalarQuery(op)) {
      const value = encodeURIComponent(validValue(op, param.name))
      const once = await fetch(`${stack.url}${op.path}?${param.name}=${value}`, { headers })
      expect(once.status, `${op.path}?${param.name}=${value}`).toBe(200)
      await once.arrayBuffer()
      const before = await snapshotKeys(stack.store, stack.keys.prefix)
      const twice = await fetch(`${stack.url}${op.path}?${param.name}=${value}&${param.name}=${value}`, {
        headers,
      })
      const body = (await twice.json()) as { error?: { code?: string; message?: string } }
      checked += 1
      const said = `${twice.status} ${body.error?.code} ${body.error?.message}`
      if (twice.status !== 400 || body.error?.code !== 'invalid_request' || !said.includes(`'${param.name}'`))
        found.push(`${op.path}?${param.name} twice: ${said}`)
      const after = await snapshotKeys(stack.store, stack.keys.prefix)
      const moved = Object.keys(after).filter((k) => after[k] !== before[k] && !k.includes(':capacity:'))
      if (moved.length > 0) found.push(`${op.path}?${param.name} twice changed ${moved.join(', ')}`)
    }
  }
  // Activity, usage, fills, earnings, payouts, the stats, capacity, the Anthropic list, admin lookups.
  expect(checked).toBeGreaterThanOrEqual(10)
  expect(found).toEqual([])
})

test('a list parameter may repeat: lifecycle[] on the Anthropic model list', async () => {
  const response = await fetch(`${stack.url}/v1/models?lifecycle[]=active&lifecycle[]=deprecated`, {
    headers: { 'anthropic-version': '2023-06-01' },
  })
  expect(response.status).toBe(200)
  expect(((await response.json()) as { data: unknown[] }).data.length).toBeGreaterThan(0)
})

test('a repeated parameter from a caller who may not use the route: 401 first', async () => {
  for (const path of ['/v1/agent/activity', '/v1/supplier/fills', '/admin/v1/payouts']) {
    const response = await fetch(`${stack.url}${path}?limit=1&limit=2&state=a&state=b`)
    expect(response.status, path).toBe(401)
  }
})
