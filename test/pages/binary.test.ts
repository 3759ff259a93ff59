// The pages come from the compiled binary itself: `npm run build`'s binary, run from an empty
// folder (no source beside it), serves /dashboard, /supplier and /admin with their bundled files
// under the same policy, and a person signs in on its dashboard and operator page in Chromium.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import type { Browser } from 'playwright-core'
import { PAGE_CSP } from '../../src/http/pages/routes.ts'
import { type SimServer, startSim } from '../../src/sim/server.ts'
import { compiledBinary } from '../helpers/binary.ts'
import { launchChromium, openPage } from '../helpers/browser.ts'
import { freePort, testPrefix, testRedisUrl } from '../helpers/stack.ts'

let child: Subprocess | undefined
let sim: SimServer
let browser: Browser
let url: string
const adminToken = `binary-admin-${randomBytes(16).toString('hex')}`

beforeAll(async () => {
  const binary = await compiledBinary()
  sim = startSim({ port: 0 })
  const port = await freePort()
  url = `http://127.0.0.1:${port}`
  child = Bun.spawn([binary, 'serve'], {
    cwd: mkdtempSync(join(tmpdir(), 'svc-pages-')),
    env: {
      PATH: process.env.PATH ?? '',
      PORT: String(port),
      HOST: '127.0.0.1',
      REDIS_URL: testRedisUrl(),
      SVC_REDIS_PREFIX: testPrefix(),
      SVC_ADMIN_TOKEN: adminToken,
      SVC_MASTER_KEY: randomBytes(32).toString('hex'),
      SVC_UPSTREAM_URL: sim.url,
      LOG_LEVEL: 'silent',
    },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  for (;;) {
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ready) break
    if (child.exitCode !== null) throw new Error(`the binary exited with ${child.exitCode}`)
    await Bun.sleep(50)
  }
  browser = await launchChromium()
}, 120_000)
afterAll(async () => {
  await browser?.close()
  child?.kill('SIGKILL')
  await child?.exited
  await sim?.stop()
})

test('the compiled binary serves every page and its bundled files under the policy', async () => {
  for (const path of ['/dashboard', '/supplier', '/admin']) {
    const page = await fetch(`${url}${path}`)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-security-policy')).toBe(PAGE_CSP)
    expect(page.headers.get('x-frame-options')).toBe('DENY')
    const html = await page.text()
    const files = [...html.matchAll(/(?:src|href)="(\/pages\/assets\/[^"]+)"/g)].map((m) => m[1]!)
    expect(files.length).toBeGreaterThanOrEqual(2)
    for (const file of files) {
      // Bundled at build time (Bun names those chunk-<hash>), not at run time from source (<page>-<hash>).
      expect(file).toMatch(/^\/pages\/assets\/chunk-[a-z0-9]{8}\.(js|css)$/)
      const asset = await fetch(`${url}${file}`)
      expect(asset.status).toBe(200)
      expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
      expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(0)
    }
  }
})

test("the binary's dashboard and operator page work in Chromium: sign in, balances, the ladder drawn", async () => {
  const wallet = `0x${randomBytes(20).toString('hex')}`
  const created = await fetch(`${url}/admin/v1/accounts`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ wallet }),
  })
  expect(created.status).toBe(201)
  const { apiKey } = (await created.json()) as { apiKey: string }

  const dashboard = await openPage(browser, `${url}/dashboard`)
  await dashboard.page.getByLabel('API key', { exact: true }).fill(apiKey)
  await dashboard.page.getByRole('button', { name: 'Sign in' }).click()
  await dashboard.page.getByRole('heading', { name: 'Balances' }).waitFor()
  expect(await dashboard.page.locator('#balances').textContent()).toContain('Confirmed$0.00')
  expect(dashboard.errors).toEqual([])
  await dashboard.close()

  const admin = await openPage(browser, `${url}/admin`)
  await admin.page.getByLabel('Admin token').fill(adminToken)
  await admin.page.getByRole('button', { name: 'Sign in' }).click()
  await admin.page.getByRole('img', { name: /^Ladder depth/ }).waitFor()
  // The totals come on their own call (a read per offer), in any order with the ladder's.
  await admin.page.locator('#totals').getByText('Buyer spend').waitFor()
  expect(await admin.page.locator('#totals').textContent()).toContain('Buyer spend$0.00')
  expect(admin.errors).toEqual([])
  await admin.close()
})
