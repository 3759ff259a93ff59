// The longest strings an owner may give (a 64-character key name, a 2048-character webhook URL)
// wrap inside a 375 px screen wherever the dashboard says them: in tables, headings and status lines.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { KEY_NAME_MAX } from '../../src/accounts/api-keys.ts'
import { WEBHOOK_URL_MAX } from '../../src/webhooks/address-check.ts'
import { mintKey, type TestAccount } from '../helpers/accounts.ts'
import { fitsWidth, launchChromium, openPage } from '../helpers/browser.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import type { TestStack } from '../helpers/stack.ts'
import { registerWebhook, startReceiver, startWebhookStack } from '../webhooks/helpers.ts'

let stack: TestStack
let browser: Browser
let buyer: TestAccount
const receiver = startReceiver()

beforeAll(async () => {
  stack = await startWebhookStack()
  browser = await launchChromium()
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '10.000000')
}, 30_000)
afterAll(async () => {
  await browser?.close()
  await stack?.stop()
  await receiver.stop()
})

test('a longest key name and webhook URL, unbroken, keep the dashboard within 375 px', async () => {
  const name = 'k'.repeat(KEY_NAME_MAX)
  await mintKey(stack, buyer.apiKey, { name })
  const url = `${receiver.url}/${'a'.repeat(WEBHOOK_URL_MAX - receiver.url.length - 1)}`
  const registered = await registerWebhook(stack, buyer.apiKey, '/v1/agent', {
    url,
    events: ['balance.low'],
    balanceThresholdUsdc: '1',
  })
  expect(registered.status).toBe(201)

  const { page, errors, close } = await openPage(browser, `${stack.url}/dashboard`, { width: 375 })
  await page.getByLabel('API key', { exact: true }).fill(buyer.apiKey)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('table', { name: 'Endpoints' }).waitFor()
  expect(await fitsWidth(page)).toBe(true)

  await page.getByLabel(`New limit for ${name} (USDC, empty for none)`).fill('5')
  await page.getByRole('button', { name: `Set limit of ${name}` }).click()
  await page.getByText(`The limit of ${name} is now $5.00.`).waitFor()
  expect(await fitsWidth(page)).toBe(true)

  await page.getByRole('button', { name: 'Delivery log' }).click()
  await page.getByRole('heading', { name: `Delivery log of ${url}` }).waitFor()
  expect(await fitsWidth(page)).toBe(true)

  await page.getByRole('button', { name: 'Disable' }).click()
  await page.getByText(`${url} was disabled`).waitFor()
  expect(await fitsWidth(page)).toBe(true)

  page.on('dialog', (dialog) => dialog.accept())
  await page.getByRole('button', { name: 'Remove' }).click()
  await page.getByText(`${url} was removed.`).waitFor()
  expect(await fitsWidth(page)).toBe(true)
  expect(errors).toEqual([])
  await close()
})
