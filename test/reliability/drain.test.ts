// SIGTERM on the real `serve` process: it stops accepting, lets an open stream finish and settle
// ([DONE], charged once), then exits 0.
import { afterAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { auditAll } from '../../src/cli/audit.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { freePort } from '../../src/redis/local-server.ts'
import { createStore } from '../../src/redis/store.ts'
import { startSim } from '../../src/sim/server.ts'
import { testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const sim = startSim({ port: 0, tokensPerSecond: 25, outputTokens: 25 })
const store = createStore(testRedisUrl())
afterAll(async () => {
  await sim.stop()
  store.close()
})

test('SIGTERM drains: the open stream completes and settles, new work is refused, exit 0', async () => {
  const prefix = testPrefix()
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
      SVC_UPSTREAM_URL: sim.url,
      SVC_SHUTDOWN_GRACE_MS: '15000',
      LOG_LEVEL: 'warn',
    },
    stdout: 'ignore',
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
  await call('/admin/v1/offers', {
    upstreamBaseUrl: sim.url,
    upstreamApiKey: 'drain-key',
    askCents: 40,
    capacityDiem: '10',
  })
  const account = (await (
    await call('/admin/v1/accounts', { wallet: `0x${randomBytes(20).toString('hex')}` })
  ).json()) as {
    accountId: string
    apiKey: string
  }
  await call(`/admin/v1/accounts/${account.accountId}/credit`, { amountUsdc: '1.000000' })

  const stream = await call(
    '/v1/chat/completions',
    { model: 'llama-3.3-70b', stream: true, messages: [{ role: 'user', content: 'a long one' }] },
    account.apiKey,
  )
  const reader = stream.body!.getReader()
  let text = new TextDecoder().decode((await reader.read()).value)
  child.kill('SIGTERM')
  // Draining: no new work is taken (the listener is closed, or /readyz says draining), once the
  // signal is handled, however long that takes on a busy machine.
  await until(async () => ((await fetch(`${base}/readyz`).catch(() => null))?.status ?? 0) !== 200)

  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    text += new TextDecoder().decode(value)
  }
  expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
  expect(text).toContain('"svc.cost"')
  expect(await child.exited).toBe(0)

  const keys = keyspace(prefix)
  const acct = await store.hgetall(keys.account(account.accountId))
  expect(Number(acct.spent)).toBeGreaterThan(0)
  expect(acct.held).toBe('0')
  expect(await auditAll(store, keys)).toEqual([])
}, 40_000)
