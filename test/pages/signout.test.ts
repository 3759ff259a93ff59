// Signing out of a page, then in as someone else in the same tab: what the first person was shown
// once (a minted key), the request record they opened, and an upstream key they typed but did not
// post must be gone from the tab, not left in the hidden console for the next person to see.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { injectWallet, launchChromium, openPage } from '../helpers/browser.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { freePort, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let browser: Browser
let first: TestAccount
let second: TestAccount

beforeAll(async () => {
  // The supplier page's sign-in message names the public URL: the stack listens where it says.
  const port = await freePort()
  stack = await startStack({ env: { PORT: String(port), SVC_PUBLIC_URL: `http://127.0.0.1:${port}` } })
  browser = await launchChromium()
  await simOffer(stack, 40)
  first = await fundedBuyer(stack, '10.000000')
  second = await fundedBuyer(stack, '10.000000')
  const response = await keyFetch(stack, first.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
  })
  expect(response.status).toBe(200)
}, 30_000)
afterAll(async () => {
  await browser?.close()
  await stack?.stop()
})

const html = (page: Page) => page.evaluate<string>('document.documentElement.outerHTML')
const inputs = (page: Page) =>
  page.evaluate<string[]>("[...document.querySelectorAll('input')].map((input) => input.value)")

async function pasteKey(page: Page, apiKey: string) {
  await page.getByLabel('API key', { exact: true }).fill(apiKey)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('table', { name: 'Active keys' }).waitFor()
}

describe('signing out', () => {
  test('dashboard: the minted key and the opened record leave the tab with the key', async () => {
    const { page, errors, close } = await openPage(browser, `${stack.url}/dashboard`)
    await pasteKey(page, first.apiKey)
    const reference = (
      (await (await keyFetch(stack, first.apiKey, '/v1/agent/activity')).json()) as {
        data: { supportReference: string }[]
      }
    ).data[0]!.supportReference
    await page.getByRole('button', { name: `Record of ${reference}` }).click()
    await page
      .getByRole('region', { name: 'Request record' })
      .getByRole('table', { name: 'Attempts' })
      .waitFor()
    await page.getByLabel('Key name').fill('shown once')
    await page.getByRole('button', { name: 'Create key' }).click()
    const minted = (await page.locator('#minted-key').textContent())!
    expect(minted).toStartWith('svc_')

    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByLabel('API key', { exact: true }).waitFor()
    // Gone from the page itself, not just hidden.
    expect(await html(page)).not.toContain(minted)
    expect(await html(page)).not.toContain(first.accountId)
    expect(await page.locator('canvas[aria-label]').count()).toBe(0)

    // The next person in this tab sees their own account, and nothing of the first one's.
    await pasteKey(page, second.apiKey)
    await page.locator('#balances').getByText(second.accountId).waitFor()
    expect(await html(page)).not.toContain(minted)
    expect(await html(page)).not.toContain(reference)
    expect(await page.getByRole('region', { name: 'Request record' }).count()).toBe(0)
    expect(errors).toEqual([])
    await close()
  })

  test('supplier page: an upstream key typed and not posted leaves the tab with the sign-in', async () => {
    const firstWallet = privateKeyToAccount(generatePrivateKey())
    const { page, errors, close } = await openPage(browser, `${stack.url}/supplier`, {
      setup: async (p) => {
        await injectWallet(p, firstWallet)
      },
    })
    await page.getByRole('button', { name: 'Connect wallet and sign in' }).click()
    await page.getByText('Fills: no fills yet').waitFor()
    const upstreamKey = `upstream-secret-${crypto.randomUUID()}`
    await page.getByLabel('Upstream API key').fill(upstreamKey)

    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByText('Signed out: the key is revoked and gone from this tab.').waitFor()
    expect(await inputs(page)).not.toContain(upstreamKey)
    expect(await html(page)).not.toContain(firstWallet.address)
    expect(errors).toEqual([])
    await close()
  })
})
