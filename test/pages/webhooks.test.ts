// The Webhooks sections in headless Chromium, worked as a person would: on the dashboard an
// endpoint registered through the page (its signing secret shown this once), an event delivered to
// the test's own loopback receiver and seen in the endpoint's delivery log, replayed, then removed;
// on the supplier page the same for a supplier's event. An endpoint's secret rotated (the next try
// signed by the new and the old) and revoked (by the newest only) by its buttons. An endpoint
// disabled and enabled by its buttons (a limited key refused), and one a 410 Gone disabled shown
// so, its dropped event skipped.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { verify } from '../../src/webhooks/signing.ts'
import { adminFetch, keyFetch, mintKey, type TestAccount } from '../helpers/accounts.ts'
import { injectWallet, launchChromium, openPage } from '../helpers/browser.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { freePort, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'
import { registerWebhook, startReceiver, startWebhookStack } from '../webhooks/helpers.ts'

let stack: TestStack
let browser: Browser
let buyer: TestAccount
const receiver = startReceiver()

beforeAll(async () => {
  // The supplier page's sign-in message names the public URL: the stack listens where it says.
  const port = await freePort()
  stack = await startWebhookStack({ PORT: String(port), SVC_PUBLIC_URL: `http://127.0.0.1:${port}` })
  browser = await launchChromium()
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '10.000000')
}, 30_000)
afterAll(async () => {
  await browser?.close()
  await stack?.stop()
  await receiver.stop()
})

test('registers an endpoint (secret shown once), shows a delivered event in its log, replays it and removes it', async () => {
  const { page, errors, close } = await openPage(browser, `${stack.url}/dashboard`, { width: 1280 })
  await page.getByLabel('API key', { exact: true }).fill(buyer.apiKey)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('heading', { name: 'Webhooks' }).waitFor()
  await page.locator('#webhooks').getByText('Endpoints: none registered').waitFor()

  await page.getByLabel('URL (public https)').fill(receiver.url)
  await page.getByLabel('balance.low', { exact: true }).check()
  await page.getByLabel('Balance threshold (USDC, for balance.low)').fill('9.999999')
  await page.getByRole('button', { name: 'Register endpoint' }).click()
  const secret = (await page.locator('#webhook-secret-value').textContent()) ?? ''
  expect(secret).toMatch(/^whsec_/)
  const endpoints = page.getByRole('table', { name: 'Endpoints' })
  await endpoints.waitFor()
  expect(await endpoints.locator('tbody tr').first().locator('td').allTextContents()).toEqual([
    receiver.url,
    'balance.low',
    '$9.999999',
    expect.any(String),
    'enabled',
    'Delivery log',
    'Disable',
    'Rotate secret Revoke secret',
    'Remove',
  ])
  // The API never shows the secret again.
  expect(
    JSON.stringify(await (await keyFetch(stack, buyer.apiKey, '/v1/agent/webhooks')).json()),
  ).not.toContain(secret)

  // A paid request takes the balance below the threshold: balance.low goes out, signed.
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] },
  })
  expect(response.status).toBe(200)
  await until(() => receiver.received.length === 1)
  const sent = receiver.received[0]!
  expect(verify(secret, sent.id, sent.timestamp, sent.body, sent.signature)).toBe(true)
  await until(async () => {
    const id = (
      (await (await keyFetch(stack, buyer.apiKey, '/v1/agent/webhooks')).json()) as {
        webhooks: { id: string }[]
      }
    ).webhooks[0]!.id
    const log = (await (
      await keyFetch(stack, buyer.apiKey, `/v1/agent/webhooks/${id}/deliveries`)
    ).json()) as {
      deliveries: unknown[]
    }
    return log.deliveries.length === 1
  })

  await page.getByRole('button', { name: `Delivery log of ${receiver.url}` }).click()
  const log = page.getByRole('table', { name: 'Deliveries, newest first' })
  await log.waitFor()
  const row = await log.locator('tbody tr').first().locator('td').allTextContents()
  expect(row.slice(0, 4)).toEqual([sent.id, 'balance.low', '1', 'delivered (200)'])

  await page.getByRole('button', { name: `Replay ${sent.id}` }).click()
  await page.locator('#webhooks-status').getByText(`${sent.id} was sent again and accepted.`).waitFor()
  expect(receiver.received).toHaveLength(2)
  expect(receiver.received[1]!.id).toBe(sent.id)
  expect(await log.locator('tbody tr').first().locator('td').nth(2).textContent()).toBe('replay')

  // Rotated: the new secret shown this once; the next try is signed by it and by the old one.
  page.once('dialog', (dialog) => dialog.accept())
  await page.getByRole('button', { name: `Rotate secret of ${receiver.url}` }).click()
  await page.locator('#webhooks-status').getByText(`${receiver.url} has a new signing secret.`).waitFor()
  const rotated = (await page.locator('#webhook-secret-value').textContent()) ?? ''
  expect(rotated).toMatch(/^whsec_/)
  expect(rotated).not.toBe(secret)
  expect(await page.locator('#webhook-secret').textContent()).toContain('The old one also signs')
  expect((await endpointRow(page, receiver.url))[7]).toMatch(
    /^old one signs until .+ Rotate secret Revoke secret$/,
  )
  await page
    .getByRole('button', { name: `Replay ${sent.id}` })
    .first()
    .click()
  await until(() => receiver.received.length === 3)
  const both = receiver.received[2]!
  const signs = (key: string, got: typeof both) => verify(key, got.id, got.timestamp, got.body, got.signature)
  expect([signs(rotated, both), signs(secret, both)]).toEqual([true, true])
  // Revoked (a leaked secret): only the newest signs from now on.
  page.once('dialog', (dialog) => dialog.accept())
  await page.getByRole('button', { name: `Revoke secret of ${receiver.url}` }).click()
  await until(async () => (await page.locator('#webhook-secret-value').textContent()) !== rotated)
  const revoked = (await page.locator('#webhook-secret-value').textContent()) ?? ''
  expect(await page.locator('#webhook-secret').textContent()).toContain('The old one no longer signs.')
  // The secret is shown before the list is read again: the row follows.
  await until(async () => (await endpointRow(page, receiver.url))[7] === 'Rotate secret Revoke secret')
  await page
    .getByRole('button', { name: `Replay ${sent.id}` })
    .first()
    .click()
  await until(() => receiver.received.length === 4)
  const last = receiver.received[3]!
  expect([signs(revoked, last), signs(rotated, last), signs(secret, last)]).toEqual([true, false, false])

  page.once('dialog', (dialog) => dialog.accept())
  await page.getByRole('button', { name: `Remove ${receiver.url}` }).click()
  await page.locator('#webhooks-status').getByText(`${receiver.url} was removed.`).waitFor()
  await page.locator('#webhooks').getByText('Endpoints: none registered').waitFor()
  expect(await page.locator('#deliveries-section').isHidden()).toBe(true)
  expect(errors).toEqual([])
  await close()
}, 60_000)

test("the supplier page: registers an endpoint (secret shown once) and shows a supplier's event delivered", async () => {
  const own = startReceiver()
  const account = privateKeyToAccount(generatePrivateKey())
  const { page, errors, close } = await openPage(browser, `${stack.url}/supplier`, {
    width: 1280,
    setup: async (p) => {
      await injectWallet(p, account)
    },
  })
  try {
    await page.getByRole('button', { name: 'Connect wallet and sign in' }).click()
    await page.locator('#webhooks').getByText('Endpoints: none registered').waitFor()
    await page.getByLabel('URL (public https)').fill(own.url)
    await page.getByLabel('supplier.suspended', { exact: true }).check()
    expect(await page.getByLabel('Balance threshold (USDC, for balance.low)').count()).toBe(0)
    await page.getByRole('button', { name: 'Register endpoint' }).click()
    const secret = (await page.locator('#webhook-secret-value').textContent()) ?? ''
    expect(secret).toMatch(/^whsec_/)
    await page.getByRole('table', { name: 'Endpoints' }).waitFor()

    const key = await page.evaluate<string>("sessionStorage.getItem('svc.supplier.key')")
    const me = (await (await keyFetch(stack, key, '/v1/supplier/me')).json()) as { supplierId: string }
    const suspended = await adminFetch(stack, `/admin/v1/suppliers/${me.supplierId}`, {
      method: 'PATCH',
      json: { status: 'suspended' },
    })
    expect(suspended.status).toBe(200)
    await until(() => own.received.length === 1)
    const sent = own.received[0]!
    expect(verify(secret, sent.id, sent.timestamp, sent.body, sent.signature)).toBe(true)
    await until(async () => {
      const listed = (await (await keyFetch(stack, key, '/v1/supplier/events')).json()) as {
        data: { deliveries: { state: string }[] }[]
      }
      return listed.data[0]?.deliveries[0]?.state === 'delivered'
    })
    await page.getByRole('button', { name: `Delivery log of ${own.url}` }).click()
    const log = page.getByRole('table', { name: 'Deliveries, newest first' })
    await log.waitFor()
    const row = await log.locator('tbody tr').first().locator('td').allTextContents()
    expect(row.slice(0, 4)).toEqual([sent.id, 'supplier.suspended', '1', 'delivered (200)'])
    expect(errors).toEqual([])
  } finally {
    await close()
    await own.stop()
  }
}, 60_000)

/** The endpoint's row in the Endpoints table, cell by cell. */
async function endpointRow(page: Page, url: string) {
  const row = page.getByRole('table', { name: 'Endpoints' }).locator('tbody tr', { hasText: url })
  return row.locator('td').allTextContents()
}

test('the dashboard disables and enables an endpoint; a limited key is refused, and says so', async () => {
  const own = startReceiver()
  const registered = await registerWebhook(stack, buyer.apiKey, '/v1/agent', {
    url: own.url,
    events: ['funding.confirmed'],
  })
  expect(registered.status).toBe(201)
  const { id } = (await registered.json()) as { id: string }
  const limited = await mintKey(stack, buyer.apiKey, { name: 'limited', limitUsdc: '1' })
  const listed = async () =>
    (
      (await (await keyFetch(stack, buyer.apiKey, '/v1/agent/webhooks')).json()) as {
        webhooks: { id: string; disabled: { reason: string } | null }[]
      }
    ).webhooks.find((endpoint) => endpoint.id === id)
  const signIn = async (apiKey: string) => {
    const opened = await openPage(browser, `${stack.url}/dashboard`, { width: 1280 })
    await opened.page.getByLabel('API key', { exact: true }).fill(apiKey)
    await opened.page.getByRole('button', { name: 'Sign in' }).click()
    await opened.page.getByRole('table', { name: 'Endpoints' }).waitFor()
    return opened
  }
  const full = await signIn(buyer.apiKey)
  const other = await signIn(limited.apiKey)
  try {
    const { page } = full
    expect((await endpointRow(page, own.url))[4]).toBe('enabled')
    await page.getByRole('button', { name: `Disable ${own.url}` }).click()
    await page.locator('#webhooks-status').getByText(`${own.url} was disabled`).waitFor()
    expect((await endpointRow(page, own.url))[4]).toMatch(/^disabled: disabled by its owner, \d/)
    expect((await listed())?.disabled?.reason).toBe('disabled by its owner')

    // A key with a spending limit may not enable it: the refusal is said, nothing changes.
    await other.page.reload()
    await other.page.getByRole('button', { name: `Enable ${own.url}` }).click()
    const refused = other.page.locator('#webhooks-status[role="alert"]')
    await refused.getByText('(key_limit_binding)').waitFor()
    expect((await listed())?.disabled?.reason).toBe('disabled by its owner')
    expect((await endpointRow(other.page, own.url))[6]).toBe('Enable')

    await page.getByRole('button', { name: `Enable ${own.url}` }).click()
    await page.locator('#webhooks-status').getByText(`${own.url} was enabled`).waitFor()
    expect((await endpointRow(page, own.url)).slice(4, 7)).toEqual(['enabled', 'Delivery log', 'Disable'])
    expect((await listed())?.disabled).toBeNull()
    expect(full.errors).toEqual([])
    expect(other.errors).toEqual([])
  } finally {
    await full.close()
    await other.close()
    await own.stop()
  }
}, 60_000)

test('the supplier page shows an endpoint a 410 Gone disabled, its dropped event skipped, and enables it', async () => {
  const gone = startReceiver([410])
  const account = privateKeyToAccount(generatePrivateKey())
  const { page, errors, close } = await openPage(browser, `${stack.url}/supplier`, {
    width: 1280,
    setup: async (p) => {
      await injectWallet(p, account)
    },
  })
  try {
    await page.getByRole('button', { name: 'Connect wallet and sign in' }).click()
    await page.locator('#webhooks').getByText('Endpoints: none registered').waitFor()
    const key = await page.evaluate<string>("sessionStorage.getItem('svc.supplier.key')")
    const me = (await (await keyFetch(stack, key, '/v1/supplier/me')).json()) as { supplierId: string }
    const registered = await registerWebhook(stack, key, '/v1/supplier', {
      url: gone.url,
      events: ['supplier.suspended', 'supplier.reinstated'],
    })
    expect(registered.status).toBe(201)
    const setStatus = (status: string) =>
      adminFetch(stack, `/admin/v1/suppliers/${me.supplierId}`, { method: 'PATCH', json: { status } })
    const events = async () =>
      (
        (await (await keyFetch(stack, key, '/v1/supplier/events')).json()) as {
          data: { type: string; deliveries: { state: string }[] }[]
        }
      ).data
    // The first event is answered 410 Gone: the endpoint is disabled; the next is dropped for it.
    expect((await setStatus('suspended')).status).toBe(200)
    await until(async () => (await events())[0]?.deliveries[0]?.state === 'failing')
    expect((await setStatus('active')).status).toBe(200)
    await until(async () => {
      const [latest] = await events()
      return latest?.type === 'supplier.reinstated' && latest.deliveries[0]?.state === 'skipped'
    })
    expect(gone.received).toHaveLength(1)

    await page.reload()
    await page.getByRole('table', { name: 'Endpoints' }).waitFor()
    const row = await endpointRow(page, gone.url)
    expect(row[4]).toMatch(/^disabled: answered 410 Gone, \d/)
    expect(row[6]).toBe('Enable')

    await page.getByRole('button', { name: `Delivery log of ${gone.url}` }).click()
    const log = page.getByRole('table', { name: 'Deliveries, newest first' })
    await log.waitFor()
    const rows = log.locator('tbody tr')
    expect((await rows.nth(0).locator('td').allTextContents()).slice(1, 4)).toEqual([
      'supplier.reinstated',
      '–',
      'skipped: endpoint disabled',
    ])
    expect((await rows.nth(1).locator('td').allTextContents()).slice(1, 4)).toEqual([
      'supplier.suspended',
      '1',
      'failed: answered 410',
    ])

    await page.getByRole('button', { name: `Enable ${gone.url}` }).click()
    await page.locator('#webhooks-status').getByText(`${gone.url} was enabled`).waitFor()
    expect((await endpointRow(page, gone.url))[4]).toBe('enabled')
    // Enabled: the next event is sent to it.
    expect((await setStatus('suspended')).status).toBe(200)
    await until(() => gone.received.length === 2)
    expect(errors).toEqual([])
  } finally {
    await close()
    await gone.stop()
  }
}, 60_000)
