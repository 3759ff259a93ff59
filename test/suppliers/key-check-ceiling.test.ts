// Suppliers cost nothing to create, so each one's own key-check fuse does not bound what the
// operator's upstream is asked: SVC_KEY_CHECKS_PER_MINUTE_TOTAL does, across every supplier and
// replica. Several suppliers each within their own count together reach it; the next post is a 429
// key_check_rate_limited with Retry-After, before the upstream is asked and with nothing written.
// Over real HTTP, through a small upstream of the test's own that counts the balance checks.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { type SimServer, startSim } from '../../src/sim/server.ts'
import { BALANCE_PATH } from '../../src/suppliers/upstream-key-check.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'

const PER_SUPPLIER = 3
const TOTAL = 5
let sim: SimServer
let upstream: ReturnType<typeof Bun.serve>
let balanceChecks = 0
let stack: TestStack

beforeAll(async () => {
  sim = startSim({ port: 0 })
  // The simulated supplier, behind a pass-through that counts each key check it is asked.
  upstream = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch(request) {
      const url = new URL(request.url)
      if (url.pathname === BALANCE_PATH) balanceChecks++
      return fetch(`${sim.url}${url.pathname}${url.search}`, {
        method: request.method,
        headers: request.headers,
        body: request.body,
      })
    },
  })
  stack = await startStack({
    env: {
      SVC_UPSTREAM_URL: `http://127.0.0.1:${upstream.port}`,
      SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE: String(PER_SUPPLIER),
      SVC_KEY_CHECKS_PER_MINUTE_TOTAL: String(TOTAL),
    },
  })
})
afterAll(async () => {
  await stack.stop()
  upstream.stop(true)
  await sim.stop()
})

const post = (who: TestSupplier) =>
  keyFetch(stack, who.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: `venice-${randomUUID()}`, askCents: 40, capacityDiem: '1' },
  })

const errorCode = async (response: Response) =>
  ((await response.json()) as { error: { code: string } }).error.code

const minuteNow = () => Math.floor(Date.now() / 60_000)

test("suppliers each within their own key checks together reach the market's; past it a post is refused before the upstream is asked", async () => {
  const suppliers = await Promise.all([1, 2, 3].map(() => signInSupplier(stack)))
  const fresh = await signInSupplier(stack)
  // Both counts are per wall-clock minute: the posts below all fall in one unless it is nearly over.
  await until(() => Date.now() % 60_000 < 45_000, 100)
  const minute = minuteNow()

  // Two posts each, one supplier after another: within every supplier's own count of three.
  const answers: Response[] = []
  for (const supplier of suppliers) for (let i = 0; i < 2; i++) answers.push(await post(supplier))
  expect(minuteNow()).toBe(minute)
  expect(answers.slice(0, TOTAL).map((a) => a.status)).toEqual(Array(TOTAL).fill(201))
  expect(balanceChecks).toBe(TOTAL)

  const refused = answers[TOTAL]!
  expect(refused.status).toBe(429)
  const retryAfter = Number(refused.headers.get('retry-after'))
  expect(retryAfter).toBeGreaterThanOrEqual(1)
  expect(retryAfter).toBeLessThanOrEqual(60)
  expect(await errorCode(refused)).toBe('key_check_rate_limited')
  expect(await stack.store.scard(stack.keys.supplierOffers(suppliers[2]!.supplierId))).toBe(1)

  // A supplier that has asked for no check at all is refused as well, with nothing written.
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const again = await post(fresh)
  expect(minuteNow()).toBe(minute)
  expect(again.status).toBe(429)
  expect(again.headers.get('retry-after')).not.toBeNull()
  expect(await errorCode(again)).toBe('key_check_rate_limited')
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  expect(await stack.store.scard(stack.keys.supplierOffers(fresh.supplierId))).toBe(0)
  expect(balanceChecks).toBe(TOTAL)
})
