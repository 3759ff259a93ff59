// The operator's page in headless Chromium, worked by roles and labels: the admin token (refused
// when wrong, kept in the tab's sessionStorage when right), health, market totals as the API
// counts them, the ladder and its offers, a supplier suspended and reinstated, an account found by
// wallet and credited by hand (a credit whose answer was lost, sent again, added once); at 375 px
// nothing scrolls sideways.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import type { Browser } from 'playwright-core'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fitsWidth, launchChromium, openPage, screenshotFor, usd } from '../helpers/browser.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let browser: Browser
let buyer: TestAccount
let supplier: TestSupplier

beforeAll(async () => {
  stack = await startStack({ env: { SVC_FEE_BPS: '500', SVC_REAP_INTERVAL_MS: '100' } })
  browser = await launchChromium()
  await simOffer(stack, 45)
  supplier = await signInSupplier(stack)
  const posted = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: `sim-${randomUUID()}`, askCents: 38, capacityDiem: '20' },
  })
  expect(posted.status).toBe(201)
  buyer = await fundedBuyer(stack, '5.000000')
  const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
  })
  expect(chat.status).toBe(200)
}, 30_000)
afterAll(async () => {
  await browser?.close()
  await stack?.stop()
})

async function signIn(width = 1280) {
  const opened = await openPage(browser, `${stack.url}/admin`, { width })
  await opened.page.getByLabel('Admin token').fill(stack.config.adminToken)
  await opened.page.getByRole('button', { name: 'Sign in' }).click()
  await opened.page.getByRole('table', { name: 'Suppliers' }).waitFor()
  return opened
}

describe('the operator page', () => {
  test('a wrong token is refused and kept nowhere', async () => {
    const { page, errors, close } = await openPage(browser, `${stack.url}/admin`)
    await page.getByLabel('Admin token').fill('not-the-token-at-all-not-the-token')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('alert').waitFor()
    expect(await page.getByRole('alert').textContent()).toContain('(invalid_admin_token)')
    expect(await page.evaluate<number>('sessionStorage.length')).toBe(0)
    expect(await page.getByRole('heading', { name: 'Health' }).isVisible()).toBe(false)
    expect(errors).toEqual([])
    await close()
  })

  test('health, totals, the ladder and its offers, as the API gives them', async () => {
    const { page, errors, close } = await signIn()
    expect(await page.evaluate<string | null>("sessionStorage.getItem('svc.admin.token')")).toBe(
      stack.config.adminToken,
    )
    const health = page.locator('#health')
    expect(await health.textContent()).toContain('Redisok')
    const replicaRows = page.getByRole('table', { name: 'Replicas' }).locator('tbody tr')
    expect(await replicaRows.count()).toBeGreaterThanOrEqual(1)
    // Every replica of this stack is of this build.
    for (const row of await replicaRows.all())
      expect(await row.locator('td').last().textContent()).toBe('current')

    const totals = (await (await adminFetch(stack, '/admin/v1/market')).json()) as Record<string, string>
    expect(Number(totals.spentUsdc)).toBeGreaterThan(0)
    // The totals come on their own call, in any order with the tables'.
    await page.locator('#totals').getByText('Buyer spend').waitFor()
    const shown = await page.locator('#totals').textContent()
    expect(shown).toContain(`Buyer spend${usd.format(Number(totals.spentUsdc))}`)
    expect(shown).toContain(`Supplier earnings${usd.format(Number(totals.earnedUsdc))}`)
    expect(shown).toContain(`Fees${usd.format(Number(totals.feesUsdc))}`)
    expect(shown).toContain('Written off$0.00')

    const offers = page.getByRole('table', { name: 'Offers' })
    expect(await offers.locator('tbody tr').count()).toBe(2)
    expect((await offers.locator('tbody tr td:nth-child(3)').allTextContents()).sort()).toEqual([
      '38¢',
      '45¢',
    ])
    expect(await page.getByRole('img', { name: /^Ladder depth/ }).getAttribute('aria-label')).toContain('38¢')
    expect(await page.locator('#payouts').textContent()).toBe(
      'In flight$0.00Payouts in flight: none in flight',
    )
    await screenshotFor(page, 'admin')
    expect(errors).toEqual([])
    await close()
  })

  test('a supplier suspended leaves the ladder, and comes back reinstated', async () => {
    const { page, errors, close } = await signIn()
    await page.getByRole('button', { name: `Suspend ${supplier.supplierId}` }).click()
    await page.getByText(`${supplier.supplierId} is now suspended.`).waitFor()
    const me = async () =>
      ((await (await keyFetch(stack, supplier.apiKey, '/v1/supplier/me')).json()) as { status: string })
        .status
    expect(await me()).toBe('suspended')
    expect(await stack.store.zcard(stack.keys.ladder)).toBe(1)

    await page.getByRole('button', { name: `Reinstate ${supplier.supplierId}` }).click()
    await page.getByText(`${supplier.supplierId} is now active.`).waitFor()
    expect(await me()).toBe('active')
    expect(await stack.store.zcard(stack.keys.ladder)).toBe(2)
    expect(errors).toEqual([])
    await close()
  })

  test('an account found by its wallet, credited by hand', async () => {
    const { page, errors, close } = await signIn()
    expect(await page.getByRole('button', { name: 'Credit account' }).isVisible()).toBe(false)
    await page.getByLabel('Account id or wallet').fill(buyer.wallet.toLowerCase())
    await page.getByRole('button', { name: 'Look up' }).click()
    await page.getByRole('button', { name: 'Credit account' }).waitFor()
    const account = page.locator('#account')
    expect(await account.textContent()).toContain(buyer.accountId)
    const before = (await (await adminFetch(stack, `/admin/v1/accounts/${buyer.accountId}`)).json()) as {
      balances: { confirmedUsdc: string; fundedUsdc: string }
    }
    expect(await account.textContent()).toContain(
      `Confirmed${usd.format(Number(before.balances.confirmedUsdc))}`,
    )

    await page.getByLabel('Credit (USDC)').fill('2.5')
    await page.getByLabel('Note').fill('goodwill')
    await page.getByRole('button', { name: 'Credit account' }).click()
    await page.getByText(`Credited $2.50 to ${buyer.accountId}.`).waitFor()
    const after = (await (await adminFetch(stack, `/admin/v1/accounts/${buyer.accountId}`)).json()) as {
      balances: { confirmedUsdc: string; fundedUsdc: string }
    }
    expect(
      Math.round((Number(after.balances.confirmedUsdc) - Number(before.balances.confirmedUsdc)) * 1e6),
    ).toBe(2_500_000)
    expect(await account.textContent()).toContain(
      `Confirmed${usd.format(Number(after.balances.confirmedUsdc))}`,
    )
    const audit = await stack.store.xrange(stack.keys.audit, '-', '+')
    expect(audit.at(-1)![1]).toEqual(expect.arrayContaining(['note', 'goodwill']))

    // An unknown wallet says so.
    await page.getByLabel('Account id or wallet').fill(`0x${'ab'.repeat(20)}`)
    await page.getByRole('button', { name: 'Look up' }).click()
    await page.getByText('(account_not_found)').waitFor()
    expect(errors).toEqual([])
    await close()
  })

  test('a credit whose answer was lost, sent again, is credited once', async () => {
    const { page, errors, close } = await signIn()
    await page.getByLabel('Account id or wallet').fill(buyer.accountId)
    await page.getByRole('button', { name: 'Look up' }).click()
    await page.getByRole('button', { name: 'Credit account' }).waitFor()
    const confirmed = async () =>
      (
        (await (await adminFetch(stack, `/admin/v1/accounts/${buyer.accountId}`)).json()) as {
          balances: { confirmedUsdc: string }
        }
      ).balances.confirmedUsdc
    const before = Number(await confirmed())

    // The gateway makes the first credit; its answer never reaches the page.
    let lost = 0
    await page.route('**/credit', async (route) => {
      if (lost > 0) return route.fallback()
      lost++
      expect((await route.fetch()).status()).toBe(200)
      await route.abort('failed')
    })
    await page.getByLabel('Credit (USDC)').fill('1.25')
    await page.getByRole('button', { name: 'Credit account' }).click()
    await page.locator('#account-status[role=alert]').waitFor()
    expect(Math.round((Number(await confirmed()) - before) * 1e6)).toBe(1_250_000)
    await page.getByRole('button', { name: 'Credit account' }).click()
    await page.getByText(`Credited $1.25 to ${buyer.accountId}.`).waitFor()
    expect(Math.round((Number(await confirmed()) - before) * 1e6)).toBe(1_250_000)

    // Answered, the next credit is a credit of its own.
    await page.getByLabel('Credit (USDC)').fill('1.25')
    await page.getByRole('button', { name: 'Credit account' }).click()
    await page.getByText(`Credited $1.25 to ${buyer.accountId}.`).waitFor()
    await until(async () => Math.round((Number(await confirmed()) - before) * 1e6) === 2_500_000)
    expect(errors).toEqual([])
    await close()
  })

  test('at 375 px nothing scrolls sideways; by keyboard alone the operator signs in', async () => {
    const { page, errors, close } = await openPage(browser, `${stack.url}/admin`, { width: 375, height: 800 })
    await page.keyboard.press('Tab')
    expect(await page.evaluate<string>('document.activeElement.id')).toBe('admin-token')
    await page.keyboard.type(stack.config.adminToken)
    await page.keyboard.press('Enter')
    await page.getByRole('table', { name: 'Suppliers' }).waitFor()
    // Focus moves to the first section, so the keyboard carries on from there.
    await page.locator('#health-title:focus').waitFor()
    expect(await fitsWidth(page)).toBe(true)
    expect(errors).toEqual([])
    await close()
  })
})
