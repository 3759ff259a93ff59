// The buyer's dashboard in headless Chromium, worked as a person would (by roles and labels): a
// pasted key kept in the tab's sessionStorage only, balances, spend, activity and a request's
// record, keys minted with a limit (shown once), limits changed and keys revoked, the max price
// against the capacity ladder with no_eligible_supply explained, at 375 px and by keyboard.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { periodStart } from '../../src/accounts/budget-periods.ts'
import { keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { fitsWidth, launchChromium, openPage, screenshotFor, usd } from '../helpers/browser.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let browser: Browser
let buyer: TestAccount

async function chat(apiKey: string) {
  return keyFetch(stack, apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
  })
}

async function json<T>(path: string, apiKey = buyer.apiKey): Promise<T> {
  return (await keyFetch(stack, apiKey, path)).json() as Promise<T>
}

beforeAll(async () => {
  stack = await startStack()
  browser = await launchChromium()
  await simOffer(stack, 40)
  await simOffer(stack, 62)
  buyer = await fundedBuyer(stack, '10.000000')
  for (let i = 0; i < 2; i++) expect((await chat(buyer.apiKey)).status).toBe(200)
}, 30_000)
afterAll(async () => {
  await browser?.close()
  await stack?.stop()
})

async function signIn(width = 1280) {
  const opened = await openPage(browser, `${stack.url}/dashboard`, { width })
  await opened.page.getByLabel('API key', { exact: true }).fill(buyer.apiKey)
  await opened.page.getByRole('button', { name: 'Sign in' }).click()
  await opened.page.getByRole('heading', { name: 'Balances' }).waitFor()
  return opened
}

describe('the buyer dashboard', () => {
  test('signs in with a pasted key kept in sessionStorage only, and shows balances, spend and activity', async () => {
    const { page, errors, close } = await signIn()
    const me = await json<{ balances: { confirmedUsdc: string; pendingUsdc: string; heldUsdc: string } }>(
      '/v1/agent/me',
    )
    const balances = page.locator('#balances')
    expect(await balances.textContent()).toContain(
      `Confirmed${usd.format(Number(me.balances.confirmedUsdc))}`,
    )
    expect(await balances.textContent()).toContain(`Pending${usd.format(Number(me.balances.pendingUsdc))}`)
    expect(await balances.textContent()).toContain(`Held${usd.format(Number(me.balances.heldUsdc))}`)
    // The key lives in this tab's sessionStorage; no cookie, nothing in localStorage.
    const storage = await page.evaluate<{ session: string | null; local: number; cookie: string }>(
      "({ session: sessionStorage.getItem('svc.dashboard.key'), local: localStorage.length, cookie: document.cookie })",
    )
    expect(storage).toEqual({ session: buyer.apiKey, local: 0, cookie: '' })
    expect(await page.context().cookies()).toEqual([])
    expect(await page.getByRole('link', { name: 'Top up with USDC' }).getAttribute('href')).toBe('/topup')

    // Activity: both requests, costs as money, times in the viewer's zone (Asia/Tokyo here).
    const activity = await json<{
      data: { supportReference: string; costUsdc: string; createdAt: string }[]
    }>('/v1/agent/activity')
    expect(activity.data).toHaveLength(2)
    const table = page.getByRole('table', { name: 'Activity' })
    await table.waitFor()
    const first = table.locator('tbody tr').first()
    const cells = await first.locator('td').allTextContents()
    const newest = activity.data[0]!
    expect(cells[0]).toBe(new Date(newest.createdAt).toLocaleString('en-US', { timeZone: 'Asia/Tokyo' }))
    expect(cells[3]).toBe(usd.format(Number(newest.costUsdc)))
    expect(cells[6]).toBe(newest.supportReference)

    // A request's record on click.
    await page.getByRole('button', { name: `Record of ${newest.supportReference}` }).click()
    const record = page.getByRole('region', { name: 'Request record' })
    await record.getByRole('table', { name: 'Attempts' }).waitFor()
    expect(await record.textContent()).toContain(`Cost${usd.format(Number(newest.costUsdc))}`)

    // Spend: the total over the window and by model, and the chart drawn on its canvas.
    const usage = await json<{ costUsdc: string }>('/v1/agent/usage?window=7d')
    expect(await page.locator('#spend-summary').textContent()).toContain(
      `Spent${usd.format(Number(usage.costUsdc))}`,
    )
    const byModel = page.getByRole('table', { name: 'Spend by model' })
    expect(await byModel.locator('tbody tr td').allTextContents()).toEqual([
      'llama-3.3-70b',
      usd.format(Number(usage.costUsdc)),
    ])
    expect(await page.getByRole('img', { name: /^Spend per day by model/ }).count()).toBe(1)
    expect(await page.evaluate<boolean>(drawnOn('spend-chart'))).toBe(true)
    await screenshotFor(page, 'dashboard')

    await page.getByRole('button', { name: 'Sign out' }).click()
    expect(await page.evaluate<number>('sessionStorage.length')).toBe(0)
    await page.getByLabel('API key', { exact: true }).waitFor()
    expect(errors).toEqual([])
    await close()
  })

  test('mints a key with a daily limit (shown once), shows its period, changes its limit and reset, and revokes it', async () => {
    const { page, errors, close } = await signIn()
    page.on('dialog', (dialog) => dialog.accept())
    await page.getByLabel('Key name').fill('batch jobs')
    await page.getByLabel('Spending limit (USDC, optional)').fill('2.5')
    await page.getByLabel('Limit resets').selectOption('daily')
    await page.getByRole('button', { name: 'Create key' }).click()
    const shown = page.locator('#minted-key')
    await shown.waitFor()
    const minted = (await shown.textContent())!
    expect(minted).toStartWith('svc_')
    expect((await keyFetch(stack, minted, '/v1/agent/me')).status).toBe(200)
    const keysTable = page.getByRole('table', { name: 'Active keys' })
    const row = keysTable.locator('tr', { hasText: 'batch jobs' })
    await row.waitFor()
    expect(await row.locator('td').nth(2).textContent()).toBe('$2.50 a day')
    // Spent this period, and when the period resets: the next 00:00 UTC, in the viewer's zone.
    expect(await row.locator('td').nth(4).textContent()).toBe('$0.00')
    const daily = await json<{ activeApiKeys: { id: string; name: string; limitResetsAt: string | null }[] }>(
      '/v1/agent/keys',
    )
    const resetsAt = daily.activeApiKeys.find((k) => k.name === 'batch jobs')!.limitResetsAt!
    expect(resetsAt).toEndWith('T00:00:00.000Z')
    expect(await row.locator('td').nth(6).textContent()).toBe(
      await page.evaluate((iso) => new Date(iso).toLocaleString(), resetsAt),
    )

    // Spent ever and spent this period are two columns: made different here (as a key that spent
    // before this period began has them), the page shows each, and what is left of the period's.
    const id = daily.activeApiKeys.find((k) => k.name === 'batch jobs')!.id
    await stack.store.hset(
      stack.keys.account(buyer.accountId),
      `spent:${id}`,
      1_400_000,
      `pstart:${id}`,
      periodStart('daily', Date.parse(resetsAt) - 1),
      `pspent:${id}`,
      1_230_000,
    )
    await page.reload()
    const spentRow = keysTable.locator('tr', { hasText: 'batch jobs' })
    await spentRow.waitFor()
    expect(await spentRow.locator('td').nth(3).textContent()).toBe('$1.40')
    expect(await spentRow.locator('td').nth(4).textContent()).toBe('$1.23')
    expect(await spentRow.locator('td').nth(5).textContent()).toBe('$1.27')

    await page.getByLabel('New limit for batch jobs (USDC, empty for none)').fill('1.5')
    await page.getByLabel('Limit of batch jobs resets').selectOption('weekly')
    await page.getByRole('button', { name: 'Set limit of batch jobs' }).click()
    await page.getByText('The limit of batch jobs is now $1.50 a week.').waitFor()
    const keys = await json<{
      activeApiKeys: { name: string; limitUsdc: string | null; limitReset: string | null }[]
    }>('/v1/agent/keys')
    expect(keys.activeApiKeys.find((k) => k.name === 'batch jobs')).toMatchObject({
      limitUsdc: '1.500000',
      limitReset: 'weekly',
    })
    expect(await keysTable.locator('tr', { hasText: 'batch jobs' }).locator('td').nth(2).textContent()).toBe(
      '$1.50 a week',
    )
    await page.getByLabel('Limit of batch jobs resets').selectOption('')
    await page.getByRole('button', { name: 'Set limit of batch jobs' }).click()
    await page.getByText('The limit of batch jobs is now $1.50.').waitFor()

    await page.getByRole('button', { name: 'Revoke batch jobs' }).click()
    await page.getByText('batch jobs was revoked.').waitFor()
    expect((await keyFetch(stack, minted, '/v1/agent/me')).status).toBe(401)
    expect(await keysTable.locator('tr', { hasText: 'batch jobs' }).count()).toBe(0)
    expect(errors).toEqual([])
    await close()
  })

  test('the max price against the ladder: below every ask, no_eligible_supply is explained and is what the API answers', async () => {
    const { page, errors, close } = await signIn()
    const ladder = page.getByRole('table', { name: 'Capacity ladder' })
    await ladder.waitFor()
    expect(await ladder.locator('tbody tr td:first-child').allTextContents()).toEqual(['40¢', '62¢'])
    expect(await page.getByRole('img', { name: /^Capacity by ask/ }).getAttribute('aria-label')).toContain(
      'your max is 50¢',
    )

    await page.getByLabel('Max price (cents per dollar)').fill('35')
    await page.getByRole('button', { name: 'Save max price' }).click()
    await page.getByText('Max price saved: 35¢ per dollar.').waitFor()
    const note = page.locator('#no-supply')
    await note.waitFor()
    expect(await note.textContent()).toContain('no_eligible_supply')
    expect(await note.textContent()).toContain('the cheapest asks 40¢')
    expect(await ladder.locator('tbody tr td:last-child').allTextContents()).toEqual(['no', 'no'])
    const refused = await chat(buyer.apiKey)
    expect(refused.status).toBe(503)
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('no_eligible_supply')

    await page.getByLabel('Max price (cents per dollar)').fill('50')
    await page.getByRole('button', { name: 'Save max price' }).click()
    await page.getByText('Max price saved: 50¢ per dollar.').waitFor()
    expect(await page.locator('#no-supply').count()).toBe(0)
    expect(await page.locator('#max-marked').textContent()).toBe(
      '1 of 2 asks are at or below your max price of 50¢: green bars are within it, grey ones above.',
    )
    expect(await ladder.locator('tbody tr td:last-child').allTextContents()).toEqual(['yes', 'no'])
    expect((await json<{ maxPriceCents: number }>('/v1/agent/me')).maxPriceCents).toBe(50)
    expect(errors).toEqual([])
    await close()
  })

  test('at 375 px nothing scrolls sideways; by keyboard alone a person signs in', async () => {
    const { page, errors, close } = await openPage(browser, `${stack.url}/dashboard`, {
      width: 375,
      height: 800,
    })
    expect(await fitsWidth(page)).toBe(true)
    await page.keyboard.press('Tab')
    expect(await page.evaluate<string>('document.activeElement.textContent')).toBe('Top up')
    await page.keyboard.press('Tab')
    expect(await page.evaluate<string>('document.activeElement.id')).toBe('api-key')
    await page.keyboard.type(buyer.apiKey)
    await page.keyboard.press('Enter')
    await page.getByRole('table', { name: 'Activity' }).waitFor()
    await page.getByRole('table', { name: 'Active keys' }).waitFor()
    expect(await fitsWidth(page)).toBe(true)
    await screenshotFor(page, 'dashboard-375')
    expect(errors).toEqual([])
    await close()
  })
})

/** An expression: true when the canvas has pixels other than its blank self (Chart.js drew). */
function drawnOn(id: string): string {
  return `(() => { const c = document.getElementById('${id}'); const blank = document.createElement('canvas');
    blank.width = c.width; blank.height = c.height; return c.width > 0 && c.toDataURL() !== blank.toDataURL() })()`
}
