// Posting an offer asks the operator's upstream whether the supplier's key is good: a supplier may
// have it asked SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE times a minute, across replicas. Past that a post
// is a 429 key_check_rate_limited with Retry-After, before the upstream is asked and with nothing
// written; another supplier's checks are its own. Over real HTTP against the simulated supplier.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { keyFetch } from '../helpers/accounts.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

const LIMIT = 3
let stack: TestStack

beforeAll(async () => {
  stack = await startStack({ env: { SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE: String(LIMIT) } })
})
afterAll(() => stack.stop())

const post = (who: TestSupplier, key: string) =>
  keyFetch(stack, who.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: key, askCents: 40, capacityDiem: '1' },
  })

const errorCode = async (response: Response) =>
  ((await response.json()) as { error: { code: string } }).error.code

/** Keys the upstream refuses: each post is a check, answered 400 upstream_key_rejected. */
async function revokedKey(): Promise<string> {
  const key = `venice-${randomUUID()}`
  const put = await fetch(`${stack.sim.url}/sim/keys/${key}`, {
    method: 'PUT',
    body: JSON.stringify({ revoked: true }),
  })
  expect(put.ok).toBe(true)
  return key
}

test('past its key checks for the minute a supplier is refused 429 with Retry-After, nothing written; another is not', async () => {
  const prober = await signInSupplier(stack)
  // Keys tried one after another: the upstream answers each, until the fuse stops them. A minute
  // that turns over on the way starts the count again, once at most in so few requests.
  let refusal: Response | undefined
  for (let tries = 0; tries <= 2 * LIMIT + 1 && !refusal; tries++) {
    const response = await post(prober, await revokedKey())
    if (response.status === 429) refusal = response
    else expect(await errorCode(response)).toBe('upstream_key_rejected')
  }
  expect(refusal?.status).toBe(429)
  const retryAfter = Number(refusal!.headers.get('retry-after'))
  expect(retryAfter).toBeGreaterThanOrEqual(1)
  expect(retryAfter).toBeLessThanOrEqual(60)
  expect(await errorCode(refusal!)).toBe('key_check_rate_limited')
  // A good key now: refused before the upstream is asked or anything is written.
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const good = await post(prober, `venice-${randomUUID()}`)
  // Unless the minute turned over just now, when it stands as any post does.
  if (good.status !== 201) {
    expect(good.status).toBe(429)
    expect(good.headers.get('retry-after')).not.toBeNull()
    expect(await errorCode(good)).toBe('key_check_rate_limited')
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    expect(await stack.store.scard(stack.keys.supplierOffers(prober.supplierId))).toBe(0)
  }
  // Another supplier's checks are counted apart.
  const other = await signInSupplier(stack)
  expect((await post(other, `venice-${randomUUID()}`)).status).toBe(201)
})
