// The supplier's fills Stream is trimmed like the account's (MINID ~): a fill older than
// SVC_RECORD_RETENTION_DAYS may still be on it and must not be listed.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { keyFetch } from '../helpers/accounts.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let supplier: TestSupplier
beforeAll(async () => {
  stack = await startStack({ env: { SVC_RECORD_RETENTION_DAYS: '1' } })
  supplier = await signInSupplier(stack)
})
afterAll(() => stack.stop())

test('a fill ended before the retention is not listed', async () => {
  const [seconds] = await stack.store.time()
  const twoDaysAgo = Number(seconds) * 1000 - 2 * 86_400_000
  const streams = stack.keys.layout === 'apart' ? [] : [stack.keys.supplierFills(supplier.supplierId)]
  for (const stream of streams)
    await stack.store.xadd(
      stream,
      `${twoDaysAgo}-0`,
      'offer',
      'off_1',
      'model',
      'm',
      'burnDiem',
      '1',
      'askCents',
      '40',
      'earnedUsdc',
      '1',
    )
  const page = (await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/fills')).json()) as {
    data: unknown[]
  }
  expect(page.data).toEqual([])
})
