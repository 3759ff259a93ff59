// A real browser for the pages: Debian's chromium, headless, driven by playwright-core, with an
// injected EIP-1193 test wallet whose window.ethereum answers like a browser wallet and signs typed
// data (eth_signTypedData_v4) and messages (personal_sign) with a viem local account on the Node side.
import { existsSync } from 'node:fs'
import { type Browser, chromium, type Page } from 'playwright-core'
import { hexToString, type PrivateKeyAccount } from 'viem'
import { CHAIN_ID } from './chain.ts'
import { parallelRun, runScoped } from './run-scope.ts'

export const CHROMIUM = '/usr/bin/chromium'

export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
]

/**
 * A browser for this file: in a parallel run, a connection to the run's one chromium (its contexts
 * close with the connection); otherwise one launched for the file. `close()` ends either.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: run scripts/ensure-chromium.sh (Debian's chromium package)`)
  }
  const run = parallelRun()
  if (!run) return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS })
  const keeper = `${import.meta.dir}/browser-keeper.ts`
  const { wsEndpoint } = await runScoped<{ wsEndpoint: string }>('browser', keeper, run)
  return chromium.connect(wsEndpoint)
}

/** What the wallet was asked to do, for assertions. */
export interface WalletLog {
  requests: string[]
  signed: { domain: Record<string, unknown>; message: Record<string, unknown> }[]
  /** Messages signed with personal_sign, as text. */
  messages: string[]
}

// Runs in the page before any of its scripts: a minimal injected provider. Only the signature
// leaves the page, through the exposed binding; the key stays in Node.
function injectedWallet(config: { address: string; chainIdHex: string }) {
  type Binding = (...args: string[]) => Promise<string>
  const w = globalThis as unknown as Record<string, unknown>
  // Looked up per call: the exposed bindings may be installed after this script runs.
  const binding = (name: string) => w[name] as Binding
  const fail = (code: number, message: string) => Object.assign(new Error(message), { code })
  w.ethereum = {
    isSvcTestWallet: true,
    async request({ method, params }: { method: string; params?: unknown[] }) {
      await binding('__svcTestWalletLog')(method)
      switch (method) {
        case 'eth_requestAccounts':
        case 'eth_accounts':
          return [config.address]
        case 'eth_chainId':
          return config.chainIdHex
        case 'wallet_switchEthereumChain': {
          const wanted = (params?.[0] as { chainId?: string } | undefined)?.chainId
          if (wanted === config.chainIdHex) return null
          throw fail(4902, `unrecognized chain ${wanted}`)
        }
        case 'eth_signTypedData_v4':
          return binding('__svcTestWalletSign')(params?.[0] as string, params?.[1] as string)
        case 'personal_sign':
          // EIP-1193 order: the message (hex of its bytes), then the address.
          return binding('__svcTestWalletPersonalSign')(params?.[0] as string, params?.[1] as string)
        default:
          throw fail(4200, `unsupported method ${method}`)
      }
    },
    on() {},
    removeListener() {},
  }
}

/** Gives `page` a window.ethereum backed by `account` on the test chain; returns its log. */
export async function injectWallet(page: Page, account: PrivateKeyAccount): Promise<WalletLog> {
  const log: WalletLog = { requests: [], signed: [], messages: [] }
  await page.exposeFunction('__svcTestWalletLog', (method: string) => {
    log.requests.push(method)
  })
  await page.exposeFunction('__svcTestWalletSign', async (address: string, json: string) => {
    // A wallet signs only for its own address and only on the chain it is on.
    if (address.toLowerCase() !== account.address.toLowerCase()) throw new Error('not this wallet')
    const { domain, types, primaryType, message } = JSON.parse(json)
    if (Number(domain.chainId) !== CHAIN_ID) throw new Error(`domain chainId ${domain.chainId}`)
    const { EIP712Domain: _, ...messageTypes } = types
    log.signed.push({ domain, message })
    return account.signTypedData({ domain, types: messageTypes, primaryType, message })
  })
  await page.exposeFunction('__svcTestWalletPersonalSign', async (hex: `0x${string}`, address: string) => {
    if (address.toLowerCase() !== account.address.toLowerCase()) throw new Error('not this wallet')
    log.messages.push(hexToString(hex))
    return account.signMessage({ message: { raw: hex } })
  })
  await page.addInitScript(injectedWallet, {
    address: account.address,
    chainIdHex: `0x${CHAIN_ID.toString(16)}`,
  })
  return log
}

export interface OpenedPage {
  page: Page
  /** Script errors and console errors (a CSP refusal is one): a page under test should have none. */
  errors: string[]
  close(): Promise<void>
}

/** A fresh context (its own sessionStorage) showing `url` as a person in `timezoneId` would see it. */
export async function openPage(
  browser: Browser,
  url: string,
  options: {
    width?: number
    height?: number
    timezoneId?: string
    setup?: (page: Page) => Promise<void>
  } = {},
): Promise<OpenedPage> {
  const context = await browser.newContext({
    viewport: { width: options.width ?? 1280, height: options.height ?? 900 },
    locale: 'en-US',
    timezoneId: options.timezoneId ?? 'Asia/Tokyo',
  })
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(error.message))
  // Chromium's own line for each 4xx a page reads on purpose is not a script error.
  page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) {
      errors.push(message.text())
    }
  })
  await options.setup?.(page)
  await page.goto(url)
  return { page, errors, close: () => context.close() }
}

/** True when the page needs no sideways scrolling at its viewport's width. */
export function fitsWidth(page: Page): Promise<boolean> {
  // A string: the tests compile without the DOM's types.
  return page.evaluate<boolean>(
    'document.documentElement.scrollWidth <= document.documentElement.clientWidth',
  )
}

/** Writes a full-page screenshot to docs/<name>.png when SVC_SCREENSHOTS is set (how docs/ gets them). */
export async function screenshotFor(page: Page, name: string): Promise<void> {
  if (!process.env.SVC_SCREENSHOTS) return
  await page.screenshot({ path: `${import.meta.dir}/../../docs/${name}.png`, fullPage: true })
}

/** Money as the pages show it to a person in the en-US locale the tests browse in. */
export const usd = new Intl.NumberFormat('en-US', {
  style: 'currency',
  currency: 'USD',
  minimumFractionDigits: 2,
  maximumFractionDigits: 6,
})
