// The browser top-up of a payment a reorg took out and whose authorization then expired unused:
// the pending credit is taken back, and the page, polling the payment, stops and says it was
// reversed and nothing was credited (never "pending" for ever). Headless Chromium with an injected
// wallet, a real chain (anvil snapshot and revert), the gateway's own watcher.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Browser } from 'playwright-core'
import { launchChromium } from '../helpers/browser.ts'
import type { TestChain } from '../helpers/chain.ts'
import { type ChainStack, startChainStack } from '../helpers/chain-stack.ts'
import type { TestStack } from '../helpers/stack.ts'
import { topUpPage } from '../helpers/topup.ts'

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

test('a top-up taken back after a reorg: the page stops polling and says it was reversed', async () => {
  const payer = await chain.newPayer(30_000_000n)
  const snapshot = await chain.testClient.snapshot()
  const { page, errors } = await topUpPage(browser, stack.url, payer, '6')
  expect(await page.getAttribute('#status', 'data-state')).toBe('pending')
  const apiKey = (await page.textContent('#key-value')) ?? ''
  expect(apiKey.startsWith('svc_')).toBe(true)

  // The reorg took the transaction out and nobody sent the authorization again; then it expired.
  await chain.testClient.revert({ id: snapshot })
  await chain.testClient.mine({ blocks: 5 })
  await chain.testClient.increaseTime({ seconds: stack.config.funding!.maxTimeoutSeconds + 120 })
  await chain.testClient.mine({ blocks: 3 })
  await page.waitForSelector('#status[data-state="reversed"]', { timeout: 20_000 })
  const said = (await page.textContent('#status')) ?? ''
  expect(said).toContain('Reversed')
  expect(said).toContain('nothing was credited')
  expect(said).toContain('6.000000 USDC')

  // Nothing left the wallet and nothing stays credited.
  expect(await chain.balanceOf(payer.address)).toBe(30_000_000n)
  const me = await fetch(`${stack.url}/v1/agent/me`, { headers: { authorization: `Bearer ${apiKey}` } })
  expect(((await me.json()) as { balances: Record<string, string> }).balances).toMatchObject({
    confirmedUsdc: '0.000000',
    pendingUsdc: '0.000000',
  })
  expect(errors).toEqual([])
  await page.close()
}, 60_000)
