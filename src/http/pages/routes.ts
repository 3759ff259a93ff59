// The pages for people: GET /dashboard (buyers, with a pasted key), /supplier (Sign-In with
// Ethereum), /admin (the admin token). Each is one HTML whose script and style are bundled files
// under /pages/assets/, named by content hash; every figure they show comes from the API.
import { Elysia, t } from 'elysia'
import type { FundingConfig } from '../../config.ts'
import { notFound } from '../../errors.ts'
import { explorerTxBase } from '../../funding/explorer.ts'
import type { Keyspace } from '../../redis/keys.ts'
import { ASSET_PATH, type Asset, buildPage } from './bundle.ts'
import admin from './web/admin.html'
import dashboard from './web/dashboard.html'
import supplier from './web/supplier.html'

const PAGES = { '/dashboard': dashboard, '/supplier': supplier, '/admin': admin }
type PagePath = keyof typeof PAGES

// Only the gateway's own files run and style these pages, they talk only to the gateway, and no
// other site may frame them (a page that holds a key or asks a wallet to sign). Chart.js draws on a
// canvas and sets sizes through the CSSOM, which style-src does not govern, so no 'unsafe-inline'.
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  // No HTML string ever becomes markup on these pages (text nodes and attributes only): a sink that
  // would take one fails loudly instead.
  "require-trusted-types-for 'script'",
].join('; ')

const SECURITY_HEADERS = {
  'content-security-policy': PAGE_CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // A site that opens a page keeps no handle on it (it could send it elsewhere); popups the page
  // opens (a wallet's) keep theirs.
  'cross-origin-opener-policy': 'same-origin-allow-popups',
}

interface Site {
  html: Map<PagePath, string>
  assets: Map<string, Asset>
}

/** The explorer's transaction URL prefix for the pages, as a meta tag (none: hashes stay plain). */
function withExplorer(html: string, explorer: string | null): string {
  if (!explorer) return html
  return html.replace('</head>', `<meta name="svc-explorer-tx" content="${explorer}"></head>`)
}

async function buildSite(explorer: string | null): Promise<Site> {
  const site: Site = { html: new Map(), assets: new Map() }
  for (const [path, bundle] of Object.entries(PAGES) as [PagePath, typeof dashboard][]) {
    const page = await buildPage(bundle)
    site.html.set(path, withExplorer(page.html, explorer))
    for (const [name, asset] of page.assets) site.assets.set(name, asset)
  }
  return site
}

export function pageRoutes(deps: { keys: Keyspace; config: { funding: FundingConfig | undefined } }) {
  const explorer = explorerTxBase(deps.config.funding)
  let site: Promise<Site> | null = null
  const load = () => {
    site ??= buildSite(explorer).catch((error) => {
      site = null
      throw error
    })
    return site
  }
  const page = async (path: PagePath) =>
    new Response((await load()).html.get(path), {
      headers: {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-cache',
        ...SECURITY_HEADERS,
      },
    })
  return new Elysia({ name: 'svc/pages', seed: deps.keys.prefix })
    .get('/dashboard', () => page('/dashboard'))
    .get('/supplier', () => page('/supplier'))
    .get('/admin', () => page('/admin'))
    .get(
      `${ASSET_PATH}:file`,
      async ({ params }) => {
        const asset = (await load()).assets.get(params.file)
        if (!asset) throw notFound('no such page asset', 'not_found')
        return new Response(asset.body, {
          headers: {
            'content-type': asset.type,
            // Named by content hash: a new build is a new name.
            'cache-control': 'public, max-age=31536000, immutable',
            ...SECURITY_HEADERS,
          },
        })
      },
      { params: t.Object({ file: t.String({ maxLength: 128 }) }) },
    )
}
