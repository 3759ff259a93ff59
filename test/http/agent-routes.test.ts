// /v1/agent over real HTTP on a real Redis: keys (list, mint at the cap under concurrency, revoke),
// max price, and /me. Every bad body is a 400 in the error shape and changes nothing in Redis.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { createAccount, keyFetch, type TestAccount, waitForLastUsed } from '../helpers/accounts.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
beforeAll(async () => {
  stack = await startStack({ env: { SVC_DEFAULT_MAX_PRICE_CENTS: '35' } })
})
afterAll(() => stack.stop())

type ErrorBody = { error: { message: string; type: string; code: string } }
type KeyList = {
  activeApiKeys: {
    id: string
    name: string
    keyPrefix: string
    createdAt: string
    lastUsedAt: string | null
  }[]
  activeApiKeyCount: number
  maxActiveApiKeys: number
}

const call = (account: TestAccount, path: string, init: RequestInit & { json?: unknown } = {}) =>
  keyFetch(stack, account.apiKey, path, init)
const listKeys = async (account: TestAccount) =>
  (await (await call(account, '/v1/agent/keys')).json()) as KeyList
const mint = (account: TestAccount, name: string) =>
  call(account, '/v1/agent/keys', { method: 'POST', json: { name } })

const settled = (account: TestAccount) => waitForLastUsed(stack, account.apiKey)

describe('GET /v1/agent/keys', () => {
  test('lists the active keys, metadata only, with the count and the cap of 10', async () => {
    const account = await createAccount(stack)
    const list = await listKeys(account)
    expect(list.activeApiKeyCount).toBe(1)
    expect(list.maxActiveApiKeys).toBe(10)
    expect(list.activeApiKeys).toHaveLength(1)
    const [key] = list.activeApiKeys
    expect(Object.keys(key!).sort()).toEqual([
      'createdAt',
      'id',
      'keyPrefix',
      'lastUsedAt',
      'limitRemainingUsdc',
      'limitReset',
      'limitResetsAt',
      'limitUsdc',
      'name',
      'periodSpentUsdc',
      'spentUsdc',
    ])
    expect(key!.id).toMatch(/^[0-9a-f-]{36}$/)
    expect(key!.name).toBe('default')
    expect(key!.keyPrefix).toBe(account.apiKey.slice(0, 12))
    expect(new Date(key!.createdAt).toISOString()).toBe(key!.createdAt)
    expect(JSON.stringify(list)).not.toContain(account.apiKey)
  })

  test('lastUsedAt is set once a key is used, and null for a key never used', async () => {
    const account = await createAccount(stack)
    const minted = (await (await mint(account, 'unused')).json()) as { keyPrefix: string }
    await settled(account)
    const keys = (await listKeys(account)).activeApiKeys
    const used = keys.find((k) => k.keyPrefix === account.apiKey.slice(0, 12))!
    const unused = keys.find((k) => k.keyPrefix === minted.keyPrefix)!
    expect(Math.abs(Date.parse(used.lastUsedAt!) - Date.now())).toBeLessThan(5_000)
    expect(unused.lastUsedAt).toBeNull()
  })
})

describe('POST /v1/agent/keys', () => {
  test('201 with the plaintext once; the new key works; the list shows only its prefix', async () => {
    const account = await createAccount(stack)
    const response = await mint(account, 'ci runner')
    expect(response.status).toBe(201)
    const body = (await response.json()) as { apiKey: string; name: string; keyPrefix: string; id: string }
    expect(body.apiKey).toMatch(/^svc_[A-Za-z0-9_-]{43}$/)
    expect(body.name).toBe('ci runner')
    expect(body.keyPrefix).toBe(body.apiKey.slice(0, 12))
    const list = await listKeys({ ...account, apiKey: body.apiKey })
    expect(list.activeApiKeyCount).toBe(2)
    // Oldest first, but two keys made in the same millisecond may come in either order.
    expect(list.activeApiKeys.map((k) => k.name).sort()).toEqual(['ci runner', 'default'])
    expect(list.activeApiKeys.find((k) => k.id === body.id)?.keyPrefix).toBe(body.keyPrefix)
    expect(JSON.stringify(list)).not.toContain(body.apiKey)
  })

  test('names of 1 and 64 characters are accepted', async () => {
    const account = await createAccount(stack)
    expect((await mint(account, 'a')).status).toBe(201)
    expect((await mint(account, 'n'.repeat(64))).status).toBe(201)
  })

  test('50 concurrent mints on an account holding 9 keys: exactly one 201 and 49 409s', async () => {
    const account = await createAccount(stack)
    for (let i = 2; i <= 9; i++) expect((await mint(account, `key ${i}`)).status).toBe(201)
    expect((await listKeys(account)).activeApiKeyCount).toBe(9)

    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => mint(account, `race ${i}`)))
    const statuses = responses.map((r) => r.status)
    expect(statuses.filter((s) => s === 201)).toHaveLength(1)
    expect(statuses.filter((s) => s === 409)).toHaveLength(49)
    const conflict = (await responses.find((r) => r.status === 409)!.json()) as ErrorBody
    expect(conflict.error.code).toBe('api_key_limit')
    expect(conflict.error.type).toBe('invalid_request_error')
    expect(JSON.stringify(conflict)).not.toContain('accepts')

    const list = await listKeys(account)
    expect(list.activeApiKeyCount).toBe(10)
    expect(list.activeApiKeys).toHaveLength(10)
    expect(await stack.store.hlen(stack.keys.accountKeys(account.accountId))).toBe(10)
  })

  const badBodies: [string, RequestInit][] = [
    ['a number for name', { body: '{"name":5}', headers: { 'content-type': 'application/json' } }],
    ['null for name', { body: '{"name":null}', headers: { 'content-type': 'application/json' } }],
    ['an array for name', { body: '{"name":["a"]}', headers: { 'content-type': 'application/json' } }],
    ['no name', { body: '{}', headers: { 'content-type': 'application/json' } }],
    ['an empty name', { body: '{"name":""}', headers: { 'content-type': 'application/json' } }],
    [
      'a 65-character name',
      { body: `{"name":"${'n'.repeat(65)}"}`, headers: { 'content-type': 'application/json' } },
    ],
    [
      'a name of 65 characters outside the BMP',
      { body: JSON.stringify({ name: '😀'.repeat(65) }), headers: { 'content-type': 'application/json' } },
    ],
    // JSON may spell a lone surrogate; it is no character, and would be stored as U+FFFD.
    ['a lone surrogate', { body: '{"name":"key \\ud800"}', headers: { 'content-type': 'application/json' } }],
    // Printed in logs, terminals and pages: no controls, no line separators, no bidi overrides.
    ...[
      'key\u0000',
      'two\nlines',
      'esc\u001b[31m',
      'del\u007f',
      'c1\u0085',
      'line\u2028',
      'gpj\u202eexe',
      'iso\u2066x',
    ].map((name): [string, RequestInit] => [
      `a name with ${JSON.stringify(name)}`,
      { body: JSON.stringify({ name }), headers: { 'content-type': 'application/json' } },
    ]),
    ['non-JSON', { body: '{"name":', headers: { 'content-type': 'application/json' } }],
    ['an empty body', { body: '', headers: { 'content-type': 'application/json' } }],
    ['no body at all', {}],
    ['a JSON array', { body: '[{"name":"a"}]', headers: { 'content-type': 'application/json' } }],
    ['JSON null', { body: 'null', headers: { 'content-type': 'application/json' } }],
    ['text/plain', { body: '{"name":"a"}', headers: { 'content-type': 'text/plain' } }],
    ['a form', { body: 'name=a', headers: { 'content-type': 'application/x-www-form-urlencoded' } }],
    ['no content type', { body: '{"name":"a"}' }],
  ]

  test('every bad body: 400 in the error shape, a clear message, nothing changed in Redis', async () => {
    const account = await createAccount(stack)
    await settled(account)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const [why, init] of badBodies) {
      const response = await call(account, '/v1/agent/keys', { method: 'POST', ...init })
      expect({ why, status: response.status }).toEqual({ why, status: 400 })
      const body = (await response.json()) as ErrorBody
      expect(body.error.type).toBe('invalid_request_error')
      expect(body.error.message.length).toBeGreaterThan(0)
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })

  test('a name is 1 to 64 characters, however many UTF-16 units they take: kept as sent', async () => {
    const account = await createAccount(stack)
    const name = `${'😀'.repeat(58)}é\u00a0ok\u200d`
    const response = await call(account, '/v1/agent/keys', { method: 'POST', json: { name } })
    expect(response.status).toBe(201)
    expect(((await response.json()) as { name: string }).name).toBe(name)
    expect((await listKeys(account)).activeApiKeys.map((k) => k.name)).toContain(name)
  })

  test('the messages name what is wrong', async () => {
    const account = await createAccount(stack)
    const message = async (init: RequestInit) =>
      ((await (await call(account, '/v1/agent/keys', { method: 'POST', ...init })).json()) as ErrorBody).error
    const json = { 'content-type': 'application/json' }
    expect((await message({ body: '{}', headers: json })).message).toBe('missing required field: name')
    expect((await message({ body: `{"name":"${'n'.repeat(65)}"}`, headers: json })).message).toBe(
      'invalid value at name: must be 1 to 64 characters, none of them a control or bidirectional formatting character',
    )
    expect((await message({ body: '{"name":5}', headers: json })).message).toContain('name')
    expect(await message({ body: '{"name":', headers: json })).toMatchObject({ code: 'invalid_json' })
    expect(await message({ body: 'name=a', headers: { 'content-type': 'text/plain' } })).toMatchObject({
      code: 'invalid_content_type',
    })
    expect((await message({ body: '', headers: json })).message).toContain('JSON object')
  })
})

describe('DELETE /v1/agent/keys/{id}', () => {
  test('revokes another key of the account: 200 {"status":"ok"}, that key gets 401, this one still works', async () => {
    const account = await createAccount(stack)
    const minted = (await (await mint(account, 'old')).json()) as { id: string; apiKey: string }
    const response = await call(account, `/v1/agent/keys/${minted.id}`, { method: 'DELETE' })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: 'ok' })
    expect((await keyFetch(stack, minted.apiKey, '/v1/agent/me')).status).toBe(401)
    const list = await listKeys(account)
    expect(list.activeApiKeys.map((k) => k.id)).not.toContain(minted.id)
    expect(list.activeApiKeyCount).toBe(1)
  })

  test('a key that revokes itself gets 200, then 401 on its next call', async () => {
    const account = await createAccount(stack)
    const own = (await listKeys(account)).activeApiKeys[0]!
    const response = await call(account, `/v1/agent/keys/${own.id}`, { method: 'DELETE' })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ status: 'ok' })
    const next = await call(account, '/v1/agent/keys')
    expect(next.status).toBe(401)
    expect(((await next.json()) as ErrorBody).error.code).toBe('invalid_api_key')
    expect(await stack.store.exists(stack.keys.accountKeys(account.accountId))).toBe(0)
  })

  test("another account's key id and unknown ids are 404s and change nothing", async () => {
    const mine = await createAccount(stack)
    const theirs = await createAccount(stack)
    const theirKey = (await listKeys(theirs)).activeApiKeys[0]!
    await settled(mine)
    await settled(theirs)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const id of [theirKey.id, randomUUID(), 'not-a-uuid', encodeURIComponent('x:keys')]) {
      const response = await call(mine, `/v1/agent/keys/${id}`, { method: 'DELETE' })
      expect(response.status).toBe(404)
      const body = (await response.json()) as ErrorBody
      expect(body.error).toMatchObject({ type: 'not_found_error', code: 'api_key_not_found' })
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    expect((await listKeys(theirs)).activeApiKeyCount).toBe(1)
  })
})

describe('PATCH /v1/agent/max-price', () => {
  test('sets 30 to 80 as given; /me shows it', async () => {
    const account = await createAccount(stack)
    for (const cents of [30, 80, 57]) {
      const response = await call(account, '/v1/agent/max-price', {
        method: 'PATCH',
        json: { maxPriceCents: cents },
      })
      expect(response.status).toBe(200)
      expect(await response.json()).toEqual({ maxPriceCents: cents })
    }
    const me = (await (await call(account, '/v1/agent/me')).json()) as { maxPriceCents: number }
    expect(me.maxPriceCents).toBe(57)
  })

  test('anything else is a 400, nothing is clamped, nothing changes', async () => {
    const account = await createAccount(stack)
    await settled(account)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const json = { 'content-type': 'application/json' }
    for (const body of [
      '{"maxPriceCents":29}',
      '{"maxPriceCents":81}',
      '{"maxPriceCents":0}',
      '{"maxPriceCents":-50}',
      '{"maxPriceCents":50.5}',
      '{"maxPriceCents":"50"}',
      '{"maxPriceCents":true}',
      '{"maxPriceCents":null}',
      '{"maxPriceCents":1e400}',
      '{"maxPrice":50}',
      '{}',
      '',
      '50',
      '{"maxPriceCents":',
    ]) {
      const response = await call(account, '/v1/agent/max-price', { method: 'PATCH', body, headers: json })
      expect({ body, status: response.status }).toEqual({ body, status: 400 })
      expect(((await response.json()) as ErrorBody).error.type).toBe('invalid_request_error')
    }
    const form = await call(account, '/v1/agent/max-price', {
      method: 'PATCH',
      body: 'maxPriceCents=50',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    })
    expect(form.status).toBe(400)
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
    const me = (await (await call(account, '/v1/agent/me')).json()) as { maxPriceCents: number }
    expect(me.maxPriceCents).toBe(35)
  })
})

describe('GET /v1/agent/me', () => {
  test('account id, wallet, confirmed, pending and held as 6-decimal strings, max price, key count', async () => {
    const account = await createAccount(stack)
    await stack.store.hset(
      stack.keys.account(account.accountId),
      'confirmed',
      '25000000',
      'pending',
      '1',
      'held',
      '20',
    )
    await mint(account, 'second')
    const response = await call(account, '/v1/agent/me')
    expect(response.status).toBe(200)
    const me = (await response.json()) as Record<string, unknown>
    expect(me).toEqual({
      accountId: account.accountId,
      wallet: account.wallet,
      balances: { confirmedUsdc: '25.000000', pendingUsdc: '0.000001', heldUsdc: '0.000020' },
      maxPriceCents: 35,
      activeApiKeyCount: 2,
      maxActiveApiKeys: 10,
      createdAt: expect.any(String),
    })
  })
})
