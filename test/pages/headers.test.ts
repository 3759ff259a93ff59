// How the pages are served: each one HTML with no inline script or style, under a strict
// Content-Security-Policy, never framed; its scripts and styles are bundled files under
// /pages/assets/, named by content hash and cached for a year; the explorer the pages link
// transactions to follows the configured network (none for a chain on this machine).
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Elysia } from 'elysia'
import fc from 'fast-check'
import type { FundingConfig } from '../../src/config.ts'
import { explorerTxBase } from '../../src/funding/explorer.ts'
import { PAGE_CSP, pageRoutes } from '../../src/http/pages/routes.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack()
})
afterAll(() => stack.stop())

const PAGES = ['/dashboard', '/supplier', '/admin']

function expectSecurityHeaders(response: Response) {
  expect(response.headers.get('content-security-policy')).toBe(PAGE_CSP)
  expect(response.headers.get('x-frame-options')).toBe('DENY')
  expect(response.headers.get('x-content-type-options')).toBe('nosniff')
  expect(response.headers.get('referrer-policy')).toBe('no-referrer')
  expect(response.headers.get('cross-origin-opener-policy')).toBe('same-origin-allow-popups')
}

/** The page's own files, as its HTML links them. */
function linked(html: string): string[] {
  return [...html.matchAll(/<(?:script|link)\b[^>]*?(?:src|href)="([^"]+)"/g)].map((m) => m[1]!)
}

describe('the pages', () => {
  test('the policy: only our own files, no framing, no base or form targets, no HTML strings as markup', () => {
    expect(PAGE_CSP).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; require-trusted-types-for 'script'",
    )
  })

  for (const path of PAGES) {
    test(`GET ${path}: HTML without inline script or style, under the policy; its files bundled and cached by hash`, async () => {
      const response = await fetch(`${stack.url}${path}`)
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8')
      expectSecurityHeaders(response)
      const html = await response.text()
      // Every script has a src; no <style> element, no style attribute, no inline handler.
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/)
      expect(html).not.toMatch(/<style\b|\sstyle=|\son[a-z]+=/i)
      const files = linked(html)
      expect(files.some((f) => f.endsWith('.js'))).toBe(true)
      expect(files.some((f) => f.endsWith('.css'))).toBe(true)
      for (const file of files) {
        expect(file).toMatch(/^\/pages\/assets\/[\w.-]+-[a-z0-9]{8}\.(js|css)$/)
        const asset = await fetch(`${stack.url}${file}`)
        expect(asset.status).toBe(200)
        expect(asset.headers.get('content-type')).toStartWith(
          file.endsWith('.js') ? 'text/javascript' : 'text/css',
        )
        expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
        expectSecurityHeaders(asset)
        const body = await asset.text()
        // Nothing that needs 'unsafe-eval' rides in the bundle.
        if (file.endsWith('.js')) expect(body).not.toMatch(/\bnew Function\(|\beval\(/)
      }
    })
  }

  test('random asset names: a shaped 404 or 400, never a 500', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ minLength: 1, maxLength: 300 }), async (name) => {
        const response = await fetch(`${stack.url}/pages/assets/${encodeURIComponent(name)}`)
        expect([400, 404, 422]).toContain(response.status)
        expect(((await response.json()) as { error: { code: string } }).error.code).toBeString()
      }),
      { numRuns: 150 },
    )
  })

  test('an unknown asset is a 404 in the error shape', async () => {
    const response = await fetch(`${stack.url}/pages/assets/nothing-here.js`)
    expect(response.status).toBe(404)
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('not_found')
  })
})

describe('transaction links', () => {
  const funding = (network: 'base' | 'base-sepolia', chainRpcUrl: string) =>
    ({ network, chainRpcUrl }) as Pick<FundingConfig, 'network' | 'chainRpcUrl'> as FundingConfig

  test('the explorer follows the network; a chain on this machine, or none, has no explorer', () => {
    expect(explorerTxBase(funding('base', 'https://mainnet.base.org'))).toBe('https://basescan.org/tx/')
    expect(explorerTxBase(funding('base-sepolia', 'https://sepolia.base.org'))).toBe(
      'https://sepolia.basescan.org/tx/',
    )
    expect(explorerTxBase(funding('base-sepolia', 'http://127.0.0.1:8545'))).toBeNull()
    expect(explorerTxBase(funding('base', 'http://localhost:8545'))).toBeNull()
    expect(explorerTxBase(undefined)).toBeNull()
  })

  test('the pages carry the explorer for the configured network, and none without one', async () => {
    const serve = (config: { funding: FundingConfig | undefined }) =>
      new Elysia()
        .use(pageRoutes({ keys: keyspace('test:{pages}'), config }))
        .listen({ port: 0, hostname: '127.0.0.1' })
    const base = serve({ funding: funding('base', 'https://mainnet.base.org') })
    const none = serve({ funding: undefined })
    try {
      const meta = async (app: typeof base) =>
        /<meta name="svc-explorer-tx" content="([^"]*)">/.exec(
          await (await fetch(`http://127.0.0.1:${app.server!.port}/supplier`)).text(),
        )?.[1] ?? null
      expect(await meta(base)).toBe('https://basescan.org/tx/')
      expect(await meta(none)).toBeNull()
    } finally {
      await base.stop(true)
      await none.stop(true)
    }
  })
})
