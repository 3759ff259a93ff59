// `serve` as a child process (the real binary's entry point) with an offer and a funded account:
// what a test needs to signal it (SIGTERM, SIGINT) as an orchestrator would.
import { expect } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { auditAll } from '../../src/cli/audit.ts'
import { marketTotals } from '../../src/market/totals.ts'
import { parseMicros } from '../../src/money/units.ts'
import { SUPPORT_REFERENCE_HEADER } from '../../src/records/support-reference.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { freePort } from '../../src/redis/local-server.ts'
import type { Store } from '../../src/redis/store.ts'
import { testPrefix, testRedisUrl } from './stack.ts'
import { until } from './wait.ts'

/** `serve` as a child process on its own prefix, with an offer on `upstreamUrl` and a funded account. */
export async function serving(
  upstreamUrl: string,
  graceMs: number,
  options: { prefix?: string; env?: Record<string, string>; logs?: boolean } = {},
) {
  const prefix = options.prefix ?? testPrefix()
  const port = freePort()
  const admin = `drain-admin-${randomBytes(16).toString('hex')}`
  const child = Bun.spawn([process.execPath, 'src/main.ts', 'serve'], {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: String(port),
      HOST: '127.0.0.1',
      REDIS_URL: testRedisUrl(),
      SVC_REDIS_PREFIX: prefix,
      SVC_ADMIN_TOKEN: admin,
      SVC_MASTER_KEY: randomBytes(32).toString('hex'),
      SVC_UPSTREAM_URL: upstreamUrl,
      // The key the catalog sync asks the video quotes with, as every test stack's.
      SVC_UPSTREAM_API_KEY: 'test-catalog-key',
      SVC_SHUTDOWN_GRACE_MS: String(graceMs),
      LOG_LEVEL: 'warn',
      ...options.env,
    },
    stdout: options.logs ? 'pipe' : 'ignore',
    stderr: 'pipe',
  })
  const base = `http://127.0.0.1:${port}`
  await until(async () => (await fetch(`${base}/readyz`).catch(() => null))?.status === 200, 50)
  const call = (path: string, body: unknown, token = admin) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
  const offer = await call('/admin/v1/offers', {
    upstreamBaseUrl: upstreamUrl,
    upstreamApiKey: 'drain-key',
    askCents: 40,
    capacityDiem: '10',
  })
  expect(offer.status).toBe(201)
  const account = (await (
    await call('/admin/v1/accounts', { wallet: `0x${randomBytes(20).toString('hex')}` })
  ).json()) as {
    accountId: string
    apiKey: string
  }
  expect(
    (await call(`/admin/v1/accounts/${account.accountId}/credit`, { amountUsdc: '1.000000' })).status,
  ).toBe(200)
  const chat = (stream: boolean) =>
    call(
      '/v1/chat/completions',
      { model: 'llama-3.3-70b', stream, messages: [{ role: 'user', content: 'a long one' }] },
      account.apiKey,
    )
  return { child, base, keys: keyspace(prefix), accountId: account.accountId, chat }
}

/** `serve` with a stream open on it, its first bytes read. */
export async function servingStream(
  upstreamUrl: string,
  graceMs: number,
  options: Parameters<typeof serving>[2] = {},
) {
  const served = await serving(upstreamUrl, graceMs, options)
  const stream = await served.chat(true)
  expect(stream.status).toBe(200)
  const reader = stream.body!.getReader()
  const first = new TextDecoder().decode((await reader.read()).value)
  return { ...served, supportReference: stream.headers.get(SUPPORT_REFERENCE_HEADER)!, reader, first }
}

/**
 * The buyer paid `costUsdc` once and holds nothing more, the supplier earned it less the fee, and
 * the audit finds nothing.
 */
export async function expectChargedOnce(store: Store, keys: Keyspace, accountId: string, costUsdc: string) {
  const acct = await store.hgetall(keys.account(accountId))
  expect(acct.held).toBe('0')
  expect(acct.inflight).toBe('0')
  expect(Number(acct.spent)).toBeGreaterThan(0)
  expect(acct.spent).toBe(costUsdc)
  const totals = await marketTotals(store, keys)
  const [spent, earned, fees] = [totals.spentUsdc, totals.earnedUsdc, totals.feesUsdc].map(parseMicros)
  expect(spent).toBe(Number(acct.spent))
  expect(earned).toBeGreaterThan(0)
  expect(earned! + fees!).toBe(spent!)
  expect(await auditAll(store, keys)).toEqual([])
}
