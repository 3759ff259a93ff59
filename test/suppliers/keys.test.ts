// Supplier keys (cap, mint, list, revoke) and the wall between buyer and supplier keys, over HTTP.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import type { ApiError } from '../../src/errors.ts'
import { SupplierKeyStore } from '../../src/suppliers/key-store.ts'
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

  test('ten active keys at most: the eleventh minted is a 409; a sign-in with ten named keys is a 409 that changes nothing', async () => {
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
    // the sign-in key gives its place to a tenth named one: no key left that a sign-in minted
    const named = (await mints.find((r) => r.status === 201)!.json()) as { apiKey: string }
    const own = (await (await keyFetch(stack, named.apiKey, '/v1/supplier/keys')).json()) as {
      activeApiKeys: { id: string; name: string }[]
    }
    const signinKey = own.activeApiKeys.find((k) => !k.name.startsWith('k'))!
    expect(
      (await keyFetch(stack, named.apiKey, `/v1/supplier/keys/${signinKey.id}`, { method: 'DELETE' })).status,
    ).toBe(200)
    expect(
      (await keyFetch(stack, named.apiKey, '/v1/supplier/keys', { method: 'POST', json: { name: 'k-last' } }))
        .status,
    ).toBe(201)
    const message = siweMessage(stack, supplier.account, await supplierNonce(stack))
    const beforeSignIn = await snapshotKeys(stack.store, stack.keys.prefix)
    const signIn = await postSignIn(stack, {
      message,
      signature: await supplier.account.signMessage({ message }),
    })
    expect(signIn.status).toBe(409)
    expect(await errorCode(signIn)).toBe('api_key_limit')
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(beforeSignIn)
    expect(await stack.store.hlen(stack.keys.supplierKeys(supplier.supplierId))).toBe(10)
  })

  test('a sign-in at ten keys replaces the oldest key a sign-in minted, never a named one', async () => {
    const supplier = await signInSupplier(stack)
    const signInAgain = async () => {
      const message = siweMessage(stack, supplier.account, await supplierNonce(stack))
      const response = await postSignIn(stack, {
        message,
        signature: await supplier.account.signMessage({ message }),
      })
      expect(response.status).toBe(200)
      return (await response.json()) as { apiKey: string; id: string; replacedKeyId: string | null }
    }
    const second = await signInAgain()
    expect(second.replacedKeyId).toBeNull()
    for (let i = 0; i < 8; i++) {
      const minted = await keyFetch(stack, second.apiKey, '/v1/supplier/keys', {
        method: 'POST',
        json: { name: `k${i}` },
      })
      expect(minted.status).toBe(201)
    }
    const firstId = (
      (await (await keyFetch(stack, second.apiKey, '/v1/supplier/keys')).json()) as {
        activeApiKeys: { id: string; name: string; createdAt: string }[]
      }
    ).activeApiKeys.find((k) => k.id !== second.id && !k.name.startsWith('k'))!.id
    const third = await signInAgain()
    expect(third.replacedKeyId).toBe(firstId)
    expect((await keyFetch(stack, supplier.apiKey, '/v1/supplier/me')).status).toBe(401)
    expect((await keyFetch(stack, third.apiKey, '/v1/supplier/me')).status).toBe(200)
    expect(await stack.store.hlen(stack.keys.supplierKeys(supplier.supplierId))).toBe(10)
    // next the second sign-in's key goes; the eight named keys stay through any number of sign-ins
    const fourth = await signInAgain()
    expect(fourth.replacedKeyId).toBe(second.id)
    const fifth = await signInAgain()
    expect(fifth.replacedKeyId).toBe(third.id)
    const left = (
      (await (await keyFetch(stack, fifth.apiKey, '/v1/supplier/keys')).json()) as {
        activeApiKeys: { id: string; name: string }[]
      }
    ).activeApiKeys
    expect(left.filter((k) => k.name.startsWith('k'))).toHaveLength(8)
    expect(left.map((k) => k.id).sort()).toEqual(expect.arrayContaining([fourth.id, fifth.id].sort()))
    expect(left).toHaveLength(10)
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

  test('a key revoked after its request was authenticated mints and revokes nothing: 401, nothing changed', async () => {
    // Another replica revoked the calling key between this request's auth and its script: the
    // script reads the supplier's keys in the same step as it acts.
    const supplier = await signInSupplier(stack)
    const keys = new SupplierKeyStore(stack.store, stack.keys)
    const caller = await keys.mint(supplier.supplierId, 'caller')
    const other = await keys.mint(supplier.supplierId, 'other')
    await keys.revoke(supplier.supplierId, caller.id)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const act of [
      () => keys.mint(supplier.supplierId, 'escape', caller.id),
      () => keys.revoke(supplier.supplierId, other.id, caller.id),
    ]) {
      const refused = await act().then(
        () => null,
        (error: unknown) => error as ApiError,
      )
      expect([refused?.status, refused?.code]).toEqual([401, 'invalid_api_key'])
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })
})
