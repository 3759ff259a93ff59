// Payouts on the pages, on a real local chain: a supplier signed in with its wallet asks for a
// payout on /supplier; the operator sees it in flight on /admin while it waits for confirmations;
// once confirmed the supplier's history shows it with its transaction (a plain hash: a chain on
// this machine has no explorer), and the chain holds that one transfer to the supplier's wallet. A
// request whose answer was lost on the way, asked again, is the same payout, not a second.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { keyFetch } from '../helpers/accounts.ts'
import { injectWallet, launchChromium, openPage } from '../helpers/browser.ts'
import { startChain, type TestChain } from '../helpers/chain.ts'
import { payoutEnv, payoutWalletOn, seedEarnings, transfersFrom, waitForPayout } from '../helpers/payouts.ts'
import { freePort, startStack, type TestStack } from '../helpers/stack.ts'

let chain: TestChain
let stack: TestStack
let browser: Browser
let payoutWallet: Awaited<ReturnType<typeof payoutWalletOn>>
const account = privateKeyToAccount(generatePrivateKey())

beforeAll(async () => {
  chain = await startChain()
  payoutWallet = await payoutWalletOn(chain)
  const port = await freePort()
  stack = await startStack({
    env: {
      ...payoutEnv(chain, payoutWallet.key),
      PORT: String(port),
      SVC_PUBLIC_URL: `http://127.0.0.1:${port}`,
    },
  })
  browser = await launchChromium()
}, 60_000)
afterAll(async () => {
  await browser?.close()
  await stack?.stop()
  await chain?.stop()
})

test('a payout asked for on /supplier, seen in flight on /admin, confirmed with its transaction', async () => {
  const supplierPage = await openPage(browser, `${stack.url}/supplier`, {
    setup: async (page) => {
      await injectWallet(page, account)
    },
  })
  const { page } = supplierPage
  await page.getByRole('button', { name: 'Connect wallet and sign in' }).click()
  await page.getByText('Payout history: no payouts yet').waitFor()
  const key = (await page.evaluate<string | null>("sessionStorage.getItem('svc.supplier.key')"))!
  const me = async () =>
    (await (await keyFetch(stack, key, '/v1/supplier/me')).json()) as Record<string, string>
  await seedEarnings(stack, (await me()).supplierId!, 2_000_000)
  await page.reload()
  await page.getByText('Payable$2.00').waitFor()

  await page.getByLabel('Payout amount (USDC)').fill('1.5')
  await page.getByRole('button', { name: 'Request payout' }).click()
  await page.getByText(/^Payout of \$1\.50 requested: (sending|pending)\.$/).waitFor()
  const [asked] = (
    (await (await keyFetch(stack, key, '/v1/supplier/payouts')).json()) as { data: { id: string }[] }
  ).data
  // Included but not yet confirmed (no block is mined here): in flight for the operator.
  const inFlight = await waitForPayout(stack, chain, key, asked!.id, ['pending', 'confirmed', 'failed'])
  expect(inFlight.state).toBe('pending')
  const admin = await openPage(browser, `${stack.url}/admin`)
  await admin.page.getByLabel('Admin token').fill(stack.config.adminToken)
  await admin.page.getByRole('button', { name: 'Sign in' }).click()
  const flight = admin.page.getByRole('table', { name: 'Payouts in flight' })
  await flight.waitFor()
  const row = await flight.locator('tbody tr td').allTextContents()
  expect(row.slice(1)).toEqual([
    (await me()).supplierId as string,
    '$1.50',
    'pending',
    inFlight.txHash as string,
  ])
  expect(await admin.page.locator('#payouts').textContent()).toContain('In flight$1.50')
  expect(admin.errors).toEqual([])
  await admin.close()

  const done = await waitForPayout(stack, chain, key, asked!.id, ['confirmed', 'failed'])
  expect(done.state).toBe('confirmed')
  await page.reload()
  const history = page.getByRole('table', { name: 'Payout history' })
  await history.waitFor()
  const cells = history.locator('tbody tr td')
  expect((await cells.allTextContents()).slice(1)).toEqual(['$1.50', 'confirmed', done.txHash as string])
  // A chain on this machine has no explorer: the hash is shown, not linked.
  expect(await cells.nth(3).locator('a').count()).toBe(0)
  expect(await page.locator('#me').textContent()).toContain('Paid out$1.50')
  expect(await page.locator('#me').textContent()).toContain('Payable$0.50')
  const transfers = await transfersFrom(chain, payoutWallet.address, account.address)
  expect(transfers).toEqual([{ to: account.address, value: 1_500_000n, tx: done.txHash as `0x${string}` }])
  expect(supplierPage.errors).toEqual([])
  await supplierPage.close()
}, 60_000)

test('a payout whose answer was lost, asked again, is the same payout: one transfer, not two', async () => {
  const supplierPage = await openPage(browser, `${stack.url}/supplier`, {
    setup: async (page) => {
      await injectWallet(page, account)
    },
  })
  const { page } = supplierPage
  await page.getByRole('button', { name: 'Connect wallet and sign in' }).click()
  await page.getByText('Payout history').waitFor()
  const key = (await page.evaluate<string | null>("sessionStorage.getItem('svc.supplier.key')"))!
  const payouts = async () =>
    ((await (await keyFetch(stack, key, '/v1/supplier/payouts')).json()) as { data: { id: string }[] }).data
  const me = async () =>
    (await (await keyFetch(stack, key, '/v1/supplier/me')).json()) as Record<string, string>
  const before = await payouts()
  await seedEarnings(stack, (await me()).supplierId!, 2_000_000)
  await page.reload()
  await page.getByText('Payable$2.50').waitFor()

  // The gateway makes the first request's payout; its answer never reaches the page.
  let lost = 0
  await page.route('**/v1/supplier/payouts', async (route) => {
    if (route.request().method() !== 'POST' || lost > 0) return route.fallback()
    lost++
    expect((await route.fetch()).status()).toBe(201)
    await route.abort('failed')
  })
  await page.getByLabel('Payout amount (USDC)').fill('1.2')
  await page.getByRole('button', { name: 'Request payout' }).click()
  await page.locator('#payouts-status[role=alert]').waitFor()
  expect((await payouts()).length).toBe(before.length + 1)
  await page.getByRole('button', { name: 'Request payout' }).click()
  await page.getByText(/^Payout of \$1\.20 requested: (sending|pending|confirmed)\.$/).waitFor()
  const after = await payouts()
  expect(after.length).toBe(before.length + 1)
  const done = await waitForPayout(stack, chain, key, after[0]!.id, ['confirmed', 'failed'])
  expect(done.state).toBe('confirmed')
  const transfers = await transfersFrom(chain, payoutWallet.address, account.address)
  expect(transfers.filter((t) => t.value === 1_200_000n)).toEqual([
    { to: account.address, value: 1_200_000n, tx: done.txHash as `0x${string}` },
  ])
  await supplierPage.close()
}, 60_000)
