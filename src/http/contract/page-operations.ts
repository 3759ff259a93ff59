// The pages for people and the operator's market-wide routes, for the OpenAPI document; merged
// into OPERATIONS (operations.ts).
import { type Operation, ok, path, query } from './operation-parts.ts'

const html = (description: string) =>
  ok(description, '200', { content: { 'text/html': { schema: { type: 'string' } } } })

export const PAGE_OPERATIONS: Record<string, Operation> = {
  'GET /dashboard': {
    summary: "The buyer's dashboard (a pasted key, kept in the tab's sessionStorage, sent as Bearer)",
    tags: ['pages'],
    security: 'none',
    ok: html('HTML under a strict Content-Security-Policy'),
    errors: [],
  },
  'GET /supplier': {
    summary: "The supplier's page (Sign-In with Ethereum from an injected wallet)",
    tags: ['pages'],
    security: 'none',
    ok: html('HTML under a strict Content-Security-Policy'),
    errors: [],
  },
  'GET /admin': {
    summary: "The operator's page (the admin token, kept in the tab's sessionStorage)",
    tags: ['pages'],
    security: 'none',
    ok: html('HTML under a strict Content-Security-Policy'),
    errors: [],
  },
  'GET /pages/assets/{file}': {
    summary: "A page's bundled script or style, named by content hash (cached for a year)",
    tags: ['pages'],
    security: 'none',
    parameters: [path('file', 'the file name, as the page links it')],
    ok: ok('JavaScript or CSS', '200', { content: { 'text/javascript': { schema: { type: 'string' } } } }),
    errors: ['NotFound'],
  },

  'GET /admin/v1/accounts': {
    summary: 'The account of a wallet (any case; 404 account_not_found when it has none)',
    tags: ['operator'],
    security: 'adminToken',
    parameters: [query('wallet', 'an EVM address', { type: 'string' })],
    errors: ['BadRequest', 'Unauthorized', 'NotFound'],
  },
  'GET /admin/v1/market': {
    summary: 'Market totals: buyer spend, supplier earnings, fees, write-offs, disputed burn',
    description:
      'Kept by the clear itself (lua/clear.lua), in the same script that moves the money: spentUsdc = earnedUsdc + feesUsdc.',
    tags: ['operator'],
    security: 'adminToken',
    errors: ['Unauthorized'],
  },
  'GET /admin/v1/health': {
    summary: "Health: Redis's ping, the replicas seen lately (by their reaper passes), the last reaper pass",
    tags: ['operator'],
    security: 'adminToken',
    errors: ['Unauthorized'],
  },
}
