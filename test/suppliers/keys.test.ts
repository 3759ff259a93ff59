// Supplier keys (cap, mint, list, revoke) and the wall between buyer and supplier keys, over HTTP.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createAccount, keyFetch } from '../helpers/accounts.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { postSignIn, signInSupplier, siweMessage, supplierNonce } from '../helpers/suppliers.ts'

let stack: TestStack

beforeAll(async () => {
  stack = await startStack()
})
afterAll(() => stack.stop())

const errorCode = async (response: Response) =>
  ((await response.json()) as { error: { code: string } }).error.code

describe('supplier keys', () => {
  test('mint, list and revoke own keys; a revoked key fails at once', async () => {
    const supplier = await signInSupplier(stack)
    const minted = await keyFetch(stack, supplier.apiKey, '/v1/supplier/keys', {
      method: 'POST',
      json: { name: 'ci' },
    })
    expect(minted.status).toBe(201)
    const key = (await minted.json()) as { id: string; apiKey: string; name: string; keyPrefix: string }
    expect(key.apiKey).toMatch(/^sup_/)
    expect(key.keyPrefix).toBe(key.apiKey.slice(0, 12))
    const list = (await (await keyFetch(stack, key.apiKey, '/v1/supplier/keys')).json()) as {
      activeApiKeys: { id: string; name: string; keyPrefix: string }[]
      activeApiKeyCount: number
      maxActiveApiKeys: number
    }
    expect(list.activeApiKeyCount).toBe(2)
    expect(list.maxActiveApiKeys).toBe(10)
    expect(list.activeApiKeys.map((k) => k.name)).toEqual(['signin', 'ci'])
    expect(JSON.stringify(list)).not.toContain(key.apiKey)
    const revoked = await keyFetch(stack, supplier.apiKey, `/v1/supplier/keys/${key.id}`, {
      method: 'DELETE',
    })
    expect(revoked.status).toBe(200)
    const after = await keyFetch(stack, key.apiKey, '/v1/supplier/me')
    expect(after.status).toBe(401)
    expect(await errorCode(after)).toBe('invalid_api_key')
    expect(
      (await keyFetch(stack, supplier.apiKey, `/v1/supplier/keys/${key.id}`, { method: 'DELETE' })).status,
    ).toBe(404)
  })

  test("another supplier's key id is a 404 and revokes nothing", async () => {
    const a = await signInSupplier(stack)
    const b = await signInSupplier(stack)
    const bKeys = (await (await keyFetch(stack, b.apiKey, '/v1/supplier/keys')).json()) as {
      activeApiKeys: { id: string }[]
    }
    const response = await keyFetch(stack, a.apiKey, `/v1/supplier/keys/${bKeys.activeApiKeys[0]!.id}`, {
      method: 'DELETE',
    })
    expect(response.status).toBe(404)
    expect((await keyFetch(stack, b.apiKey, '/v1/supplier/me')).status).toBe(200)
  })

  test('ten active keys at most: the eleventh, minted or signed in, is a 409 that changes nothing', async () => {
    const supplier = await signInSupplier(stack)
    const mints = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        keyFetch(stack, supplier.apiKey, '/v1/supplier/keys', { method: 'POST', json: { name: `k${i}` } }),
      ),
    )
    expect(mints.filter((r) => r.status === 201)).toHaveLength(9)
    const refusedMints = mints.filter((r) => r.status === 409)
    expect(refusedMints).toHaveLength(3)
    expect(await errorCode(refusedMints[0]!)).toBe('api_key_limit')
    const message = siweMessage(stack, supplier.account, await supplierNonce(stack))
    const beforeSignIn = await snapshotKeys(stack.redis, stack.keys.prefix)
    const signIn = await postSignIn(stack, {
      message,
      signature: await supplier.account.signMessage({ message }),
    })
    expect(signIn.status).toBe(409)
    expect(await errorCode(signIn)).toBe('api_key_limit')
    expect(await snapshotKeys(stack.redis, stack.keys.prefix)).toEqual(beforeSignIn)
    expect(await stack.redis.hlen(stack.keys.supplierKeys(supplier.supplierId))).toBe(10)
  })
})

describe('buyer and supplier keys never open each other', () => {
  test('a buyer key on supplier routes is 401', async () => {
    const buyer = await createAccount(stack)
    for (const path of [
      '/v1/supplier/me',
      '/v1/supplier/keys',
      '/v1/supplier/offers',
      '/v1/supplier/fills',
    ]) {
      const response = await keyFetch(stack, buyer.apiKey, path)
      expect(response.status).toBe(401)
      expect(await errorCode(response)).toBe('invalid_api_key')
    }
    const post = await keyFetch(stack, buyer.apiKey, '/v1/supplier/keys', {
      method: 'POST',
      json: { name: 'x' },
    })
    expect(post.status).toBe(401)
  })

  test('a supplier key on buyer routes is 401', async () => {
    const supplier = await signInSupplier(stack)
    const chat = { model: 'llama-3.3-70b', messages: [{ role: 'user', content: 'hi' }] }
    const calls: [string, string, unknown?][] = [
      ['GET', '/v1/agent/me'],
      ['GET', '/v1/agent/keys'],
      ['POST', '/v1/agent/keys', { name: 'x' }],
      ['GET', '/v1/agent/activity'],
      ['POST', '/v1/chat/completions', chat],
      ['POST', '/v1/responses', { model: 'llama-3.3-70b', input: 'hi' }],
    ]
    for (const [method, path, json] of calls) {
      const response = await keyFetch(stack, supplier.apiKey, path, { method, ...(json ? { json } : {}) })
      expect({ path, status: response.status }).toEqual({ path, status: 401 })
      expect(await errorCode(response)).toBe('invalid_api_key')
    }
  })

  test('no key, a malformed key, or a cookie is 401 on supplier routes', async () => {
    const supplier = await signInSupplier(stack)
    expect((await keyFetch(stack, null, '/v1/supplier/me')).status).toBe(401)
    expect((await keyFetch(stack, 'sup_short', '/v1/supplier/me')).status).toBe(401)
    const withCookie = await keyFetch(stack, supplier.apiKey, '/v1/supplier/me', {
      headers: { cookie: 'a=b' },
    })
    expect(withCookie.status).toBe(401)
    expect(await errorCode(withCookie)).toBe('cookies_not_accepted')
  })
})
