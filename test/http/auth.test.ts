// Bearer-key auth over real HTTP: what is a 401, cookies refused, a revoke felt at once on every
// replica, one Redis command per request to resolve a key, and no plaintext key in any response
// or log line after mint.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { digestApiKey, generateApiKey } from '../../src/accounts/api-keys.ts'
import { startGateway } from '../../src/gateway.ts'
import { createLogger } from '../../src/logger.ts'
import {
  adminFetch,
  createAccount,
  keyFetch,
  logCapture,
  type TestAccount,
  waitForLastUsed,
} from '../helpers/accounts.ts'
import { watchCommands } from '../helpers/monitor.ts'
import { serverOf } from '../helpers/redis-cluster.ts'
import { startStack, type TestStack, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
beforeAll(async () => {
  // The reaper's pass would land inside the command count below; these tests hold no leases.
  stack = await startStack({ env: { SVC_REAP_INTERVAL_MS: '60000' } })
})
afterAll(() => stack.stop())

type ErrorBody = { error: { message: string; type: string; code: string } }

const me = (headers: Record<string, string>, base = stack.url) => fetch(`${base}/v1/agent/me`, { headers })

async function expect401(response: Response, code: string): Promise<ErrorBody> {
  expect(response.status).toBe(401)
  expect(response.headers.get('www-authenticate')).toBe('Bearer')
  const body = (await response.json()) as ErrorBody
  expect(body.error.type).toBe('authentication_error')
  expect(body.error.code).toBe(code)
  return body
}

describe('Bearer keys', () => {
  let account: TestAccount
  beforeAll(async () => {
    account = await createAccount(stack)
  })

  test('a valid key is accepted; the scheme is case-insensitive', async () => {
    expect((await me({ authorization: `Bearer ${account.apiKey}` })).status).toBe(200)
    expect((await me({ authorization: `bearer ${account.apiKey}` })).status).toBe(200)
  })

  test("x-api-key (Anthropic's clients send it) is the same key; beside a Bearer it must be the same one", async () => {
    expect((await me({ 'x-api-key': account.apiKey })).status).toBe(200)
    expect(
      (await me({ 'x-api-key': account.apiKey, authorization: `Bearer ${account.apiKey}` })).status,
    ).toBe(200)
    const other = await createAccount(stack)
    await expect401(
      await me({ 'x-api-key': account.apiKey, authorization: `Bearer ${other.apiKey}` }),
      'invalid_api_key',
    )
    await expect401(await me({ 'x-api-key': 'svc_short' }), 'invalid_api_key')
    await expect401(
      await me({ 'x-api-key': account.apiKey, cookie: 'session=abc123' }),
      'cookies_not_accepted',
    )
  })

  test('no Authorization header: 401 missing_api_key', async () => {
    await expect401(await me({}), 'missing_api_key')
  })

  test('malformed, unknown and look-alike keys: 401 invalid_api_key, never echoing the key', async () => {
    const unknown = generateApiKey().plaintext
    for (const authorization of [
      'Bearer',
      'Bearer ',
      `Basic ${Buffer.from(`user:${account.apiKey}`).toString('base64')}`,
      account.apiKey,
      `Token ${account.apiKey}`,
      `Bearer ${account.apiKey} extra`,
      `Bearer ${account.apiKey}x`,
      `Bearer ${account.apiKey.slice(0, -1)}`,
      `Bearer ${account.apiKey.toUpperCase()}`,
      'Bearer svc_short',
      `Bearer ${unknown}`,
    ]) {
      const response = await me({ authorization })
      expect({ authorization, status: response.status }).toEqual({ authorization, status: 401 })
      const text = await response.text()
      expect(text).not.toContain(account.apiKey)
      expect(text).not.toContain(unknown)
    }
  })

  test('a session cookie alone is a 401, and so is a cookie beside a valid key', async () => {
    await expect401(await me({ cookie: 'session=abc123' }), 'cookies_not_accepted')
    await expect401(
      await me({ cookie: 'session=abc123', authorization: `Bearer ${account.apiKey}` }),
      'cookies_not_accepted',
    )
    await expect401(
      await me({ cookie: `svc_session=${account.apiKey}`, authorization: `Bearer ${account.apiKey}` }),
      'cookies_not_accepted',
    )
    const mint = await keyFetch(stack, account.apiKey, '/v1/agent/keys', {
      method: 'POST',
      json: { name: 'via cookie' },
      headers: { cookie: 'session=abc123' },
    })
    await expect401(mint, 'cookies_not_accepted')
    expect(await stack.store.hlen(stack.keys.accountKeys(account.accountId))).toBe(1)
  })

  test('credentials are checked before the body is read: no key and a bad body is a 401', async () => {
    const response = await fetch(`${stack.url}/v1/agent/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{not json',
    })
    await expect401(response, 'missing_api_key')
  })

  test('public routes need no key and do not mind a cookie', async () => {
    expect((await fetch(`${stack.url}/v1/models`, { headers: { cookie: 'session=1' } })).status).toBe(200)
  })

  test('resolving a key is one Redis command: HGETALL of its digest', async () => {
    const own = await createAccount(stack)
    await waitForLastUsed(stack, own.apiKey)
    // The run's server is shared: only this stack's commands count (on a Cluster, all of them reach
    // the master that serves the stack's hash tag).
    const feed = await watchCommands(await serverOf(testRedisUrl(), stack.keys.prefix))
    const mine = () => feed.seen.filter((args) => args.some((a) => a.startsWith(stack.keys.prefix)))
    // Redis's monitor feed is in the order commands ran: a marker read seen there means every
    // command before it was seen too, however late the feed arrives on a busy machine.
    const marker = `${stack.keys.prefix}:monitor-marker`
    const markerSeen = async () => {
      const id = randomUUID()
      await stack.store.exists(`${marker}:${id}`)
      await until(() => feed.seen.some((args) => args[1] === `${marker}:${id}`))
    }
    try {
      await markerSeen()
      // An unknown key id: auth, then one read of the account's keys, then the 404.
      const response = await keyFetch(
        stack,
        own.apiKey,
        '/v1/agent/keys/00000000-0000-4000-8000-000000000000',
        {
          method: 'DELETE',
        },
      )
      expect(response.status).toBe(404)
      await markerSeen()
    } finally {
      feed.stop()
    }
    const seen = mine()
    // The stack's own loops (the webhook consumer, the reaper) may read between the markers: only
    // the commands on this key's and this account's names are the request's.
    const ours = (args: string[]) =>
      args.some((a) => a.startsWith(`${stack.keys.prefix}:apikey:`) || a.includes(own.accountId))
    const between = seen.slice(seen.findIndex((args) => args[1]?.startsWith(marker)) + 1, -1).filter(ours)
    expect(between.map((args) => args[0]!.toLowerCase())).toEqual(['hgetall', 'hget'])
    expect(between[0]![1]).toStartWith(`${stack.keys.prefix}:apikey:`)
  })

  test('lastUsedAt is not written on every request', async () => {
    const own = await createAccount(stack)
    await waitForLastUsed(stack, own.apiKey)
    // Pretend the stored value is ancient: this replica still wrote it within the minute, so it waits.
    const hash = stack.keys.apiKey(digestApiKey(own.apiKey))
    await stack.store.hset(hash, 'lastUsedAt', '1')
    for (let i = 0; i < 5; i++) expect((await me({ authorization: `Bearer ${own.apiKey}` })).status).toBe(200)
    await Bun.sleep(50)
    expect(await stack.store.hget(hash, 'lastUsedAt')).toBe('1')
  })
})

describe('the port', () => {
  test('a second gateway on a port already served refuses to start; the first serves on', async () => {
    const port = Number(new URL(stack.url).port)
    const second = await startGateway({ ...stack.config, port }, createLogger('silent')).catch((e) => e)
    expect(second).toBeInstanceOf(Error)
    expect(String((second as Error & { code?: string }).code ?? (second as Error).message)).toContain(
      'EADDRINUSE',
    )
    const account = await createAccount(stack)
    expect((await me({ authorization: `Bearer ${account.apiKey}` })).status).toBe(200)
  })
})

describe('revocation', () => {
  test('a revoked key fails at once on every replica', async () => {
    const other = await startGateway(stack.config, createLogger('silent'))
    try {
      const account = await createAccount(stack)
      const minted = (await (
        await keyFetch(stack, account.apiKey, '/v1/agent/keys', { method: 'POST', json: { name: 'b' } })
      ).json()) as { id: string; apiKey: string }
      const auth = { authorization: `Bearer ${minted.apiKey}` }
      expect((await me(auth, other.url)).status).toBe(200)
      expect((await me(auth, stack.url)).status).toBe(200)
      const revoked = await keyFetch(stack, account.apiKey, `/v1/agent/keys/${minted.id}`, {
        method: 'DELETE',
      })
      expect(revoked.status).toBe(200)
      await expect401(await me(auth, other.url), 'invalid_api_key')
      await expect401(await me(auth, stack.url), 'invalid_api_key')
    } finally {
      await other.stop()
    }
  })
})

describe('plaintext keys after mint', () => {
  test('appear in no response and no log line', async () => {
    const logs = logCapture()
    const logged = await startStack({ logger: createLogger('trace', 'svc-test', logs.stream) })
    const seen: string[] = []
    const record = async (response: Response) => {
      seen.push(`${response.status} ${JSON.stringify([...response.headers])} ${await response.text()}`)
      return response
    }
    try {
      const account = await createAccount(logged)
      const minted = (await (
        await keyFetch(logged, account.apiKey, '/v1/agent/keys', { method: 'POST', json: { name: 'second' } })
      ).json()) as { id: string; apiKey: string }
      const plaintexts = [account.apiKey, minted.apiKey]
      const secrets = [...plaintexts, ...plaintexts.map((k) => k.slice(12)), logged.config.adminToken]

      for (const apiKey of plaintexts) {
        await record(await keyFetch(logged, apiKey, '/v1/agent/keys'))
        await record(await keyFetch(logged, apiKey, '/v1/agent/me'))
        await record(await keyFetch(logged, apiKey, '/v1/agent/keys', { method: 'POST', body: '{bad' }))
        await record(await keyFetch(logged, apiKey, '/v1/agent/keys/nope', { method: 'DELETE' }))
        await record(await keyFetch(logged, apiKey, '/v1/agent/me', { headers: { cookie: `s=${apiKey}` } }))
        await record(await keyFetch(logged, `${apiKey}x`, '/v1/agent/me'))
        await record(await adminFetch(logged, `/admin/v1/accounts/${account.accountId}`))
        await record(
          await adminFetch(logged, '/admin/v1/accounts', { headers: { authorization: `Bearer ${apiKey}` } }),
        )
      }
      await record(await keyFetch(logged, minted.apiKey, `/v1/agent/keys/${minted.id}`, { method: 'DELETE' }))
      await record(await keyFetch(logged, minted.apiKey, '/v1/agent/me'))
      // Each request's access line is written after its response is sent.
      await until(() => logs.lines.filter((line) => line.includes('"msg":"request')).length >= seen.length)

      expect(seen.length).toBe(18)
      expect(logs.lines.length).toBeGreaterThanOrEqual(20)
      expect(logs.lines.some((line) => line.includes('"msg":"request"'))).toBe(true)
      for (const secret of secrets) {
        for (const response of seen) expect(response).not.toContain(secret)
        for (const line of logs.lines) expect(line).not.toContain(secret)
      }
    } finally {
      await logged.stop()
    }
  })
})
