// The supplier's page in headless Chromium, worked by roles and labels, with an injected EIP-1193
// wallet that signs the Sign-In with Ethereum message by personal_sign: the sup_ key kept in the
// tab's sessionStorage, an offer posted, changed, paused and resumed, fills and earnings per day
// after a buyer's request, sign-out revoking the key; at 375 px nothing scrolls sideways.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import type { Browser } from 'playwright-core'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { keyFetch } from '../helpers/accounts.ts'
import {
  fitsWidth,
  injectWallet,
  launchChromium,
  openPage,
  screenshotFor,
  usd,
  type WalletLog,
} from '../helpers/browser.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { freePort, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let browser: Browser
const account = privateKeyToAccount(generatePrivateKey())

beforeAll(async () => {
  const port = await freePort()
  stack = await startStack({ env: { PORT: String(port), SVC_PUBLIC_URL: `http://127.0.0.1:${port}` } })
  browser = await launchChromium()
}, 30_000)
afterAll(async () => {
  await browser?.close()
  await stack?.stop()
})

async function openSignedIn(width = 1280) {
  let wallet: WalletLog | undefined
  const opened = await openPage(browser, `${stack.url}/supplier`, {
    width,
    setup: async (page) => {
      wallet = await injectWallet(page, account)
    },
  })
  await opened.page.getByRole('button', { name: 'Connect wallet and sign in' }).click()
  await opened.page
    .getByRole('table', { name: 'Fills' })
    .or(opened.page.getByText('Fills: no fills yet'))
    .waitFor()
  return { ...opened, wallet: wallet! }
}

const supplierKey = (page: import('playwright-core').Page) =>
  page.evaluate<string | null>("sessionStorage.getItem('svc.supplier.key')")

describe('the supplier page', () => {
  test('signs in with the wallet (personal_sign of an EIP-4361 message); the key stays in the tab', async () => {
    const { page, wallet, errors, close } = await openSignedIn()
    expect(wallet.requests).toEqual(
      expect.arrayContaining(['eth_requestAccounts', 'eth_chainId', 'personal_sign']),
    )
    expect(wallet.messages).toHaveLength(1)
    const host = new URL(stack.url).host
    expect(wallet.messages[0]).toStartWith(
      `${host} wants you to sign in with your Ethereum account:\n${account.address}`,
    )
    expect(wallet.messages[0]).toContain(`URI: ${stack.url}/supplier`)
    expect(await page.locator('#wallet').textContent()).toBe(account.address)
    const key = await supplierKey(page)
    expect(key).toStartWith('sup_')
    expect((await keyFetch(stack, key, '/v1/supplier/me')).status).toBe(200)
    expect(await page.context().cookies()).toEqual([])
    expect(await page.evaluate<number>('localStorage.length')).toBe(0)
    expect(await page.locator('#payouts').textContent()).toBe('Payout history: no payouts yet')

    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByText('Signed out: the key is revoked and gone from this tab.').waitFor()
    expect((await keyFetch(stack, key, '/v1/supplier/me')).status).toBe(401)
    expect(await page.evaluate<number>('sessionStorage.length')).toBe(0)
    expect(errors).toEqual([])
    await close()
  })

  test('posts an offer, changes its ask and capacity, pauses and resumes it; fills and earnings per day follow a sale', async () => {
    const { page, errors, close } = await openSignedIn()
    const key = (await supplierKey(page))!
    await page.getByLabel('Upstream API key').fill(`sim-${randomUUID()}`)
    await page.getByLabel('Ask (cents per dollar)').fill('42')
    await page.getByLabel('Capacity (DIEM)').fill('25')
    await page.getByRole('button', { name: 'Post offer' }).click()
    await page.getByText(/^Offer \S+ posted at 42¢\.$/).waitFor()
    const offers = async () =>
      (
        (await (await keyFetch(stack, key, '/v1/supplier/offers')).json()) as {
          data: { id: string; askCents: number; capacityDiem: string; status: string }[]
        }
      ).data
    const [offer] = await offers()
    expect(offer).toMatchObject({ askCents: 42, capacityDiem: '25.000000', status: 'active' })
    expect(await stack.store.zscore(stack.keys.ladder, offer!.id)).not.toBeNull()

    await page.getByLabel(`Ask of ${offer!.id}`).fill('44')
    await page.getByLabel(`Capacity of ${offer!.id}`).fill('30')
    await page
      .getByRole('form', { name: `Change offer ${offer!.id}` })
      .getByRole('button', { name: 'Save' })
      .click()
    await page.getByText(`Offer ${offer!.id} saved.`).waitFor()
    expect((await offers())[0]).toMatchObject({ askCents: 44, capacityDiem: '30.000000' })

    await page.getByRole('button', { name: `Pause offer ${offer!.id}` }).click()
    await page.getByText(`Offer ${offer!.id} is now paused.`).waitFor()
    expect((await offers())[0]!.status).toBe('paused')
    expect(await stack.store.zscore(stack.keys.ladder, offer!.id)).toBeNull()
    await page.getByRole('button', { name: `Resume offer ${offer!.id}` }).click()
    await page.getByText(`Offer ${offer!.id} is now active.`).waitFor()
    expect((await offers())[0]!.status).toBe('active')

    // A buyer's request fills the offer; the page, reloaded in the same tab, shows it.
    const buyer = await fundedBuyer(stack)
    const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
    })
    expect(chat.status).toBe(200)
    await page.reload()
    const fills = page.getByRole('table', { name: 'Fills' })
    await fills.waitFor()
    const apiFills = (
      (await (await keyFetch(stack, key, '/v1/supplier/fills')).json()) as {
        data: { earnedUsdc: string; createdAt: string }[]
      }
    ).data
    expect(apiFills).toHaveLength(1)
    const cells = await fills.locator('tbody tr td').allTextContents()
    expect(cells[0]).toBe(
      new Date(apiFills[0]!.createdAt).toLocaleString('en-US', { timeZone: 'Asia/Tokyo' }),
    )
    expect(cells[5]).toBe(usd.format(Number(apiFills[0]!.earnedUsdc)))
    const daily = await page
      .getByRole('table', { name: 'Earnings per day' })
      .locator('tbody tr td')
      .allTextContents()
    // days are the gateway's UTC days, whatever the viewer's zone
    expect(daily).toEqual([
      new Date(apiFills[0]!.createdAt).toLocaleDateString('en-US', { timeZone: 'UTC' }),
      '1',
      usd.format(Number(apiFills[0]!.earnedUsdc)),
    ])
    const me = (await (await keyFetch(stack, key, '/v1/supplier/me')).json()) as { earnedUsdc: string }
    expect(await page.locator('#me').textContent()).toContain(`Earned${usd.format(Number(me.earnedUsdc))}`)
    await screenshotFor(page, 'supplier')
    expect(errors).toEqual([])
    await close()
  })

  test('without a wallet it says so', async () => {
    const bare = await openPage(browser, `${stack.url}/supplier`, { width: 375 })
    await bare.page.getByRole('button', { name: 'Connect wallet and sign in' }).click()
    expect(await bare.page.getByRole('alert').textContent()).toContain('No wallet found')
    await bare.close()
  })

  // One page load for both, as the dashboard and operator pages do.
  test('at 375 px nothing scrolls sideways; by keyboard alone a supplier signs in', async () => {
    const { page, errors, close } = await openPage(browser, `${stack.url}/supplier`, {
      width: 375,
      setup: async (page) => {
        await injectWallet(page, account)
      },
    })
    await page.keyboard.press('Tab')
    expect(await page.evaluate<string>('document.activeElement.id')).toBe('connect')
    await page.keyboard.press('Enter')
    await page.locator('#me-title:focus').waitFor()
    expect(await page.locator('#wallet').textContent()).toBe(account.address)
    await page.getByRole('table', { name: 'Fills' }).or(page.getByText('Fills: no fills yet')).waitFor()
    expect(await fitsWidth(page)).toBe(true)
    expect(errors).toEqual([])
    await close()
  })
})
