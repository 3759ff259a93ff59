// The browser top-up, end to end: GET /topup in headless Chromium with an injected wallet, the 402
// challenge, the signed X-PAYMENT retry, pending then confirmed credit on the page, on a real chain.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHash } from 'node:crypto'
import type { Browser } from 'playwright-core'
import type { PrivateKeyAccount } from 'viem'
import { launchChromium } from '../helpers/browser.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import { snapshotKeys, type TestStack } from '../helpers/stack.ts'
import { topUpPage } from '../helpers/topup.ts'
import { pay, post } from '../helpers/x402.ts'

let chain: TestChain
let stack: TestStack
let chainStack: ChainStack
let browser: Browser
beforeAll(async () => {
  chainStack = await startChainStack({ confirmations: 2, env: { SVC_X402_WATCH_INTERVAL_MS: '50' } })
  ;({ chain, stack } = chainStack)
  browser = await launchChromium()
}, 30_000)
afterAll(async () => {
  await browser?.close()
  await chainStack.stop()
})

const topupUrl = () => `${stack.url}/v1/x402/topup`

async function me(key: string) {
  const response = await fetch(`${stack.url}/v1/agent/me`, { headers: { authorization: `Bearer ${key}` } })
  return (await response.json()) as {
    accountId: string
    balances: { confirmedUsdc: string; pendingUsdc: string; heldUsdc: string }
  }
}

/** Opens the page as `payer`'s browser, connects, and pays `amount`; stops once it shows pending. */
const topUpInBrowser = (payer: PrivateKeyAccount, amount: string) =>
  topUpPage(browser, stack.url, payer, amount)

describe('the top-up routes', () => {
  test('GET /topup is the page, its one script and one style allowed by hash, framing refused', async () => {
    const response = await fetch(`${stack.url}/topup`)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
    const html = await response.text()
    const script = /<script>([\s\S]*?)<\/script>/.exec(html)?.[1] ?? ''
    expect(script).toContain('eth_signTypedData_v4')
    // A pending payment is asked after as often as the watcher looks (50 ms here), not slower.
    expect(html).toContain('data-poll-ms="50"')
    const hash = createHash('sha256').update(script).digest('base64')
    const csp = response.headers.get('content-security-policy') ?? ''
    expect(csp).toContain(`script-src 'sha256-${hash}'`)
    expect(csp).toContain("frame-ancestors 'none'")
    expect(csp).toContain("connect-src 'self'")
    const style = /<style>([\s\S]*?)<\/style>/.exec(html)?.[1] ?? ''
    expect(style).toContain('font')
    expect(csp).toContain(`style-src 'sha256-${createHash('sha256').update(style).digest('base64')}'`)
    expect(csp).not.toContain('unsafe-inline')
    expect(response.headers.get('x-frame-options')).toBe('DENY')
  })

  test('an unpaid top-up is the 402 challenge; bad input is 400 and changes nothing', async () => {
    const unpaid = await post(topupUrl(), { amountUsdc: '12.000000' })
    expect(unpaid.status).toBe(402)
    expect(unpaid.body.accepts).toEqual([
      expect.objectContaining({ maxAmountRequired: '12000000', resource: topupUrl(), payTo: chain.payTo }),
    ])
    expect(unpaid.headers.get('payment-required')).toBeTruthy()

    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    expect((await post(topupUrl(), { amountUsdc: '0.5' })).status).toBe(400)
    expect((await post(topupUrl(), { amountUsdc: 12 })).status).toBe(400)
    const badTx = await fetch(`${stack.url}/v1/x402/payments/0x1234`)
    expect(badTx.status).toBe(400)
    const unknownTx = await fetch(`${stack.url}/v1/x402/payments/0x${'ab'.repeat(32)}`)
    expect(unknownTx.status).toBe(404)
    expect(((await unknownTx.json()) as { error: { code: string } }).error.code).toBe('payment_not_found')
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})

describe('in headless Chromium with an injected wallet', () => {
  test('a new wallet tops up: its account is opened, the page shows pending, then confirmed', async () => {
    const payer = await chain.newPayer(30_000_000n)
    const payToBefore = await chain.balanceOf(chain.payTo)
    const { page, wallet, errors } = await topUpInBrowser(payer, '7.5')
    expect(await page.getAttribute('#status', 'data-state')).toBe('pending')
    expect(wallet.requests).toContain('eth_signTypedData_v4')
    expect(wallet.signed).toHaveLength(1)
    expect(wallet.signed[0]?.message).toMatchObject({ value: '7500000', to: chain.payTo })

    // Money moved once, to payTo; the account is the payer's, credited pending.
    expect(await chain.balanceOf(payer.address)).toBe(22_500_000n)
    expect(await chain.balanceOf(chain.payTo)).toBe(payToBefore + 7_500_000n)
    expect(await page.isVisible('#key')).toBe(true)
    const apiKey = (await page.textContent('#key-value')) ?? ''
    expect(apiKey.startsWith('svc_')).toBe(true)
    const pending = await me(apiKey)
    expect(pending.balances).toEqual({
      confirmedUsdc: '0.000000',
      pendingUsdc: '7.500000',
      heldUsdc: '0.000000',
    })
    const accountId = await stack.store.hget(stack.keys.wallets, payer.address.toLowerCase())
    expect(accountId).toBe(pending.accountId)

    await chain.testClient.mine({ blocks: 2 })
    await page.waitForSelector('#status[data-state="confirmed"]', { timeout: 15_000 })
    expect(await page.textContent('#status')).toContain('7.500000 USDC is spendable')
    expect((await me(apiKey)).balances).toEqual({
      confirmedUsdc: '7.500000',
      pendingUsdc: '0.000000',
      heldUsdc: '0.000000',
    })
    expect(errors).toEqual([])
    await page.close()
  }, 20_000)

  test("an existing account's wallet tops up the same account; no new key is shown", async () => {
    const payer = await chain.newPayer(30_000_000n)
    const { response: signup } = await pay(`${stack.url}/v1/x402/signup`, { amountUsdc: '2.000000' }, payer)
    expect(signup.status).toBe(201)
    const apiKey = signup.body.apiKey as string
    const keysBefore = await stack.store.hlen(stack.keys.accountKeys(signup.body.accountId as string))

    const { page, errors } = await topUpInBrowser(payer, '3')
    expect(await page.getAttribute('#status', 'data-state')).toBe('pending')
    expect(await page.isVisible('#key')).toBe(false)
    const after = await me(apiKey)
    expect(after.accountId).toBe(signup.body.accountId as string)
    expect(Number(after.balances.confirmedUsdc) + Number(after.balances.pendingUsdc)).toBe(5)
    expect(await stack.store.hlen(stack.keys.accountKeys(signup.body.accountId as string))).toBe(keysBefore)
    expect(await chain.balanceOf(payer.address)).toBe(25_000_000n)
    expect(errors).toEqual([])
    await page.close()
  }, 20_000)

  test('an amount the gateway refuses is shown as an error; the wallet is never asked to sign', async () => {
    const payer = await chain.newPayer(5_000_000n)
    const { page, wallet } = await topUpInBrowser(payer, '5000')
    expect(await page.getAttribute('#status', 'data-state')).toBe('error')
    expect(await page.textContent('#status')).toContain('amountUsdc must be')
    expect(wallet.requests).not.toContain('eth_signTypedData_v4')
    expect(await chain.balanceOf(payer.address)).toBe(5_000_000n)
    await page.close()
  }, 20_000)

  // Last in the file: the reverted chain leaves the gateway relayer's recorded nonce ahead of it.
  test('a reorg moves the payment to the transaction that did use its authorization: the page follows it to confirmed', async () => {
    const payer = await chain.newPayer(30_000_000n)
    const snapshot = await chain.testClient.snapshot()
    const { page, header, errors } = await topUpInBrowser(payer, '4')
    expect(await page.getAttribute('#status', 'data-state')).toBe('pending')

    // The reorg: the gateway's transaction is gone; the same signed authorization is sent by another.
    await chain.testClient.revert({ id: snapshot })
    const second = await chain.sendAuthorization(header)
    // Missing SVC_CONFIRMATIONS blocks past its depth: the watcher moves it, then confirms it.
    await chain.testClient.mine({ blocks: 5 })
    await page.waitForSelector('#status[data-state="confirmed"]', { timeout: 15_000 })
    expect(await page.textContent('#status')).toContain('4.000000 USDC is spendable')
    expect(await page.textContent('#status')).toContain(second.transaction.toLowerCase())
    expect(errors).toEqual([])
    await page.close()
  }, 30_000)
})
