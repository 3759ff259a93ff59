// The browser top-up page worked as a person would: connect the injected wallet, pick an amount,
// sign and pay.
import { expect } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import type { PrivateKeyAccount } from 'viem'
import { injectWallet, type WalletLog } from './browser.ts'

/**
 * Opens `gatewayUrl`/topup as `payer`'s browser, connects, and pays `amount`; stops once it shows
 * pending (or an error). `header`: the X-PAYMENT the page sent, if any.
 */
export async function topUpPage(
  browser: Browser,
  gatewayUrl: string,
  payer: PrivateKeyAccount,
  amount: string,
): Promise<{ page: Page; wallet: WalletLog; errors: string[]; header: string }> {
  const page = await browser.newPage()
  const errors: string[] = []
  let header = ''
  page.on('request', (request) => {
    header = request.headers()['x-payment'] ?? header
  })
  page.on('pageerror', (error) => errors.push(error.message))
  // Script errors and CSP refusals; Chromium's own line for every 402 the page reads is expected.
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) {
      errors.push(message.text())
    }
  })
  const wallet = await injectWallet(page, payer)
  await page.goto(`${gatewayUrl}/topup`)
  await page.click('#connect')
  await page.waitForSelector('#status[data-state="connected"]')
  expect((await page.textContent('#wallet'))?.toLowerCase()).toBe(payer.address.toLowerCase())
  await page.fill('#amount', amount)
  await page.click('#pay')
  await page.waitForSelector('#status[data-state="pending"], #status[data-state="error"]')
  return { page, wallet, errors, header }
}
