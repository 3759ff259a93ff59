// Text from parties who may lie (an upstream's model ids and names, a buyer's key names, a webhook
// URL, an error echoing input) is shown on the dashboard and the supplier page as text only: markup
// in it never becomes an element, and no script it carries runs.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser, Page } from 'playwright-core'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { SIM_MODELS, type VeniceModel } from '../../src/sim/models.ts'
import { keyFetch, mintKey, type TestAccount } from '../helpers/accounts.ts'
import { injectWallet, launchChromium, openPage } from '../helpers/browser.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { freePort, startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'
import { registerWebhook, startReceiver } from '../webhooks/helpers.ts'

const MARKUP = `<img src=x onerror="window.__pwned=1">`
const HOSTILE_ID = `m${MARKUP}`
const HOSTILE_NAME = `n${MARKUP}<script>window.__pwned=2</script>`
const llama = SIM_MODELS.find((m) => m.id === 'llama-3.3-70b')!

let stack: TestStack
let browser: Browser
let buyer: TestAccount
const account = privateKeyToAccount(generatePrivateKey())
const receiver = startReceiver()

// The operator's upstream: lists a model whose id and name are markup; serves it as llama.
const upstream = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: async (request) => {
    const url = new URL(request.url)
    if (url.pathname === '/models') {
      const hostile = { ...llama, id: HOSTILE_ID, model_spec: { ...llama.model_spec, name: HOSTILE_NAME } }
      return Response.json({ object: 'list', data: [llama, hostile as VeniceModel] })
    }
    let body: string | undefined
    if (request.method === 'POST') {
      const sent = JSON.parse(await request.text()) as { model?: unknown }
      if (sent.model === HOSTILE_ID) sent.model = llama.id
      body = JSON.stringify(sent)
    }
    const headers = new Headers(request.headers)
    headers.delete('host')
    headers.delete('content-length')
    const answer = await fetch(`${stack.sim.url}${url.pathname}${url.search}`, {
      method: request.method,
      headers,
      body,
    })
    return new Response(answer.body, { status: answer.status, headers: answer.headers })
  },
})

beforeAll(async () => {
  const port = await freePort()
  stack = await startStack({
    env: {
      PORT: String(port),
      SVC_PUBLIC_URL: `http://127.0.0.1:${port}`,
      SVC_UPSTREAM_URL: `http://127.0.0.1:${upstream.port}`,
      SVC_WEBHOOK_ALLOW_LOOPBACK: '1',
    },
  })
  browser = await launchChromium()
  const supplier = await signInSupplier(stack, account)
  const posted = await keyFetch(stack, supplier.apiKey, '/v1/supplier/offers', {
    method: 'POST',
    json: { upstreamApiKey: 'sim-hostile', askCents: 40, capacityDiem: '20' },
  })
  expect(posted.status).toBe(201)
  buyer = await fundedBuyer(stack, '5.000000')
  const models = (await (await fetch(`${stack.url}/v1/models`)).json()) as { data: { id: string }[] }
  expect(models.data.map((m) => m.id)).toContain(HOSTILE_ID)
  const chat = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: HOSTILE_ID, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] },
  })
  expect(chat.status).toBe(200)
  await mintKey(stack, buyer.apiKey, { name: MARKUP })
  const hook = await registerWebhook(stack, buyer.apiKey, '/v1/agent', {
    url: `${receiver.url}/${encodeURIComponent(MARKUP)}?q=${MARKUP}`,
    events: ['balance.low'],
    balanceThresholdUsdc: '1',
  })
  expect(hook.status).toBe(201)
}, 60_000)
afterAll(async () => {
  await browser?.close()
  await stack?.stop()
  upstream.stop(true)
  await receiver.stop()
})

async function expectInert(page: Page, errors: string[]) {
  expect(await page.evaluate<unknown>('window.__pwned')).toBeUndefined()
  expect(await page.evaluate<number>("document.querySelectorAll('img, body script').length")).toBe(0)
  expect(errors).toEqual([])
}

test('the dashboard shows a markup model id, key name and webhook URL as text', async () => {
  const { page, errors, close } = await openPage(browser, `${stack.url}/dashboard`)
  await page.getByLabel('API key', { exact: true }).fill(buyer.apiKey)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('table', { name: 'Active keys' }).waitFor()
  await page.getByRole('table', { name: 'Activity' }).waitFor()
  await page.getByRole('table', { name: 'Endpoints' }).waitFor()
  expect(await page.locator('#activity').textContent()).toContain(HOSTILE_ID)
  expect(await page.locator('#spend-models').textContent()).toContain(HOSTILE_ID)
  expect(await page.locator('#keys').textContent()).toContain(MARKUP)
  await page.getByRole('table', { name: 'Activity' }).locator('button').first().click()
  await page.getByRole('table', { name: 'Attempts' }).waitFor()
  expect(await page.locator('#record').textContent()).toContain(HOSTILE_ID)
  // A mint refused for its name: the error line is text too.
  await page.getByLabel('Key name').fill(`${MARKUP}\u202e`)
  await page.getByRole('button', { name: 'Create key' }).click()
  await page.locator('#keys-status[role=alert]').waitFor()
  await expectInert(page, errors)
  await close()
})

test('the supplier page shows a markup model id in its fills as text', async () => {
  const { page, errors, close } = await openPage(browser, `${stack.url}/supplier`, {
    setup: async (p) => {
      await injectWallet(p, account)
    },
  })
  await page.getByRole('button', { name: 'Connect wallet and sign in' }).click()
  await page.getByRole('table', { name: 'Fills' }).waitFor()
  expect(await page.locator('#fills').textContent()).toContain(HOSTILE_ID)
  await expectInert(page, errors)
  await close()
})
