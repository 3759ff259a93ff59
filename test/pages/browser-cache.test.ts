// What a signed-in page reads (an account, its keys and webhooks, a supplier's earnings, the
// operator's views) is never kept in the browser's HTTP cache: after a sign-out nothing of it can be
// read back from the cache without a key. Public answers that say how long they may be kept still do.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { launchChromium, openPage } from '../helpers/browser.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let browser: Browser
let buyer: TestAccount

beforeAll(async () => {
  stack = await startStack()
  browser = await launchChromium()
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '10.000000')
}, 30_000)
afterAll(async () => {
  await browser?.close()
  await stack?.stop()
})

const BUYER_READS = ['/v1/agent/me', '/v1/agent/keys', '/v1/agent/webhooks', '/v1/agent/activity?limit=20']

describe('signed-in answers and the browser cache', () => {
  test('dashboard: after a sign-out the account cannot be read back from the cache', async () => {
    const { page, errors, close } = await openPage(browser, `${stack.url}/dashboard`)
    await page.getByLabel('API key', { exact: true }).fill(buyer.apiKey)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('table', { name: 'Active keys' }).waitFor()
    await page.locator('#webhooks').getByText('Endpoints: none registered').waitFor()
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByLabel('API key', { exact: true }).waitFor()
    // `only-if-cached` answers from the cache alone, stale or not, and sends no key: a stored answer
    // would hand the signed-out account to whoever uses the tab next.
    const fromCache = await page.evaluate<string[], string[]>(
      (paths) =>
        Promise.all(
          paths.map((path) =>
            fetch(path, { cache: 'only-if-cached', mode: 'same-origin', credentials: 'omit' }).then(
              async (response) => `${path}: ${response.status} ${await response.text()}`,
              () => `${path}: not cached`,
            ),
          ),
        ),
      BUYER_READS,
    )
    expect(fromCache).toEqual(BUYER_READS.map((path) => `${path}: not cached`))
    expect(errors).toEqual([])
    await close()
  })

  test('over HTTP: buyer, supplier and admin reads are no-store; the public ladder keeps its max-age', async () => {
    const supplier = await signInSupplier(stack)
    const reads = [
      ...BUYER_READS.map((path) => keyFetch(stack, buyer.apiKey, path)),
      keyFetch(stack, supplier.apiKey, '/v1/supplier/me'),
      keyFetch(stack, supplier.apiKey, '/v1/supplier/offers'),
      adminFetch(stack, `/admin/v1/accounts/${buyer.accountId}`),
      adminFetch(stack, '/admin/v1/suppliers'),
      // A nonce is for one sign-in: no cache may hand it out twice.
      keyFetch(stack, null, '/v1/supplier/nonce'),
    ]
    for (const response of await Promise.all(reads)) {
      expect(response.status).toBe(200)
      expect(response.headers.get('cache-control')).toBe('no-store')
    }
    const ladder = await keyFetch(stack, buyer.apiKey, '/v1/capacity')
    expect(ladder.headers.get('cache-control')).toMatch(/^public, max-age=\d+$/)
  })
})
