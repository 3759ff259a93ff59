// Sign-In with Ethereum end to end: real HTTP, real Redis, messages signed by viem local accounts.
// Every refusal is a 4xx in the contract's shape and changes nothing in Redis.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { SignInService } from '../../src/suppliers/signin.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { keysUnder, snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'
import { postSignIn, signInSupplier, siweMessage, supplierNonce } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack

beforeAll(async () => {
  stack = await startStack({ env: { SVC_PUBLIC_URL: 'https://gateway.example' } })
})
afterAll(() => stack.stop())

const newAccount = () => privateKeyToAccount(generatePrivateKey())

/** A refusal: its status and code, with Redis exactly as before the request. */
async function refused(body: unknown) {
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  const response = await postSignIn(stack, body)
  const json = (await response.json()) as { error: { code: string; type: string; message: string } }
  expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  return { status: response.status, code: json.error.code }
}

describe('sign-in', () => {
  test('a signed message gives a supplier, its wallet and a sup_ key shown once', async () => {
    const account = newAccount()
    const supplier = await signInSupplier(stack, account)
    expect(supplier.supplierId).toMatch(/^spl_[0-9a-f]{24}$/)
    expect(supplier.wallet).toBe(account.address)
    expect(supplier.apiKey).toMatch(/^sup_[A-Za-z0-9_-]{43}$/)
    const stored = await stack.store.hgetall(stack.keys.supplier(supplier.supplierId))
    expect(stored).toMatchObject({ wallet: account.address, status: 'active', paidOut: '0', pending: '0' })
    expect(await stack.store.hget(stack.keys.supplierWallets, account.address.toLowerCase())).toBe(
      supplier.supplierId,
    )
    // only the digest is stored
    const dump = JSON.stringify(await snapshotKeys(stack.store, stack.keys.prefix))
    expect(dump).not.toContain(Buffer.from(supplier.apiKey).toString('hex'))
    const me = await keyFetch(stack, supplier.apiKey, '/v1/supplier/me')
    expect(me.status).toBe(200)
    expect(await me.json()).toMatchObject({
      supplierId: supplier.supplierId,
      wallet: account.address,
      status: 'active',
      earnedUsdc: '0.000000',
      paidOutUsdc: '0.000000',
      payoutPendingUsdc: '0.000000',
      payableUsdc: '0.000000',
    })
  })

  test('the same wallet signs in again: the same supplier and a new key, both keys working', async () => {
    const account = newAccount()
    const first = await signInSupplier(stack, account)
    const second = await signInSupplier(stack, account)
    expect(second.supplierId).toBe(first.supplierId)
    expect(second.apiKey).not.toBe(first.apiKey)
    for (const key of [first.apiKey, second.apiKey]) {
      expect((await keyFetch(stack, key, '/v1/supplier/me')).status).toBe(200)
    }
    expect(await stack.store.scard(stack.keys.suppliers)).toBeGreaterThanOrEqual(1)
  })

  test('a nonce signs in once: the second use is refused', async () => {
    const account = newAccount()
    const message = siweMessage(stack, account, await supplierNonce(stack))
    const signature = await account.signMessage({ message })
    expect((await postSignIn(stack, { message, signature })).status).toBe(200)
    expect(await refused({ message, signature })).toEqual({ status: 401, code: 'siwe_nonce_invalid' })
  })

  test('the same nonce sent by many at once signs in exactly once', async () => {
    const account = newAccount()
    const message = siweMessage(stack, account, await supplierNonce(stack))
    const signature = await account.signMessage({ message })
    const statuses = await Promise.all(
      Array.from({ length: 20 }, async () => (await postSignIn(stack, { message, signature })).status),
    )
    expect(statuses.filter((s) => s === 200)).toHaveLength(1)
    expect(statuses.filter((s) => s === 401)).toHaveLength(19)
  })

  test('a nonce the gateway never issued is refused', async () => {
    const account = newAccount()
    const message = siweMessage(stack, account, 'abcdefgh12345678')
    expect(await refused({ message, signature: await account.signMessage({ message }) })).toEqual({
      status: 401,
      code: 'siwe_nonce_invalid',
    })
  })

  const cases: [string, Record<string, unknown>, string][] = [
    ['another domain', { domain: 'evil.example' }, 'siwe_domain_mismatch'],
    ['the gateway host on another port', { domain: 'gateway.example:8443' }, 'siwe_domain_mismatch'],
    ['another URI', { uri: 'https://evil.example/supplier' }, 'siwe_uri_mismatch'],
    ['an http URI for an https gateway', { uri: 'http://gateway.example/supplier' }, 'siwe_uri_mismatch'],
    ['an expired message', { expirationTime: new Date(Date.now() - 1_000) }, 'siwe_expired'],
    ['a message not valid yet', { notBefore: new Date(Date.now() + 60 * 60_000) }, 'siwe_not_yet_valid'],
  ]
  for (const [name, over, code] of cases) {
    test(`${name} is refused (${code}), its nonce still usable`, async () => {
      const account = newAccount()
      const nonce = await supplierNonce(stack)
      const message = siweMessage(stack, account, nonce, over)
      expect(await refused({ message, signature: await account.signMessage({ message }) })).toEqual({
        status: 401,
        code,
      })
      const good = siweMessage(stack, account, nonce)
      expect(
        (await postSignIn(stack, { message: good, signature: await account.signMessage({ message: good }) }))
          .status,
      ).toBe(200)
    })
  }

  test('a message off the EIP-4361 form is refused (invalid_siwe_message), its nonce still usable', async () => {
    const account = newAccount()
    const nonce = await supplierNonce(stack)
    // Expired: only a parser that skips its Expiration Time line would sign it in.
    const message = siweMessage(stack, account, nonce, {
      expirationTime: new Date(Date.now() - 1_000),
      notBefore: new Date(Date.now() - 60_000),
    })
    const lines = message.split('\n')
    const expiry = lines.findIndex((line) => line.startsWith('Expiration Time: '))
    const reordered = [...lines]
    reordered.splice(expiry, 2, lines[expiry + 1]!, lines[expiry]!)
    const variants = [
      reordered.join('\n'),
      `${message}\nsigned elsewhere too`,
      `${message}\n`,
      `${message}\nNonce: ${nonce}`,
      message.replace('Sign in to sell capacity.', 'Sign in\nto sell capacity.'),
      message.replace(`${account.address}\n\n`, `${account.address}\n`),
      `${lines[0]}\n${message}`,
    ]
    for (const variant of variants) {
      const signature = await account.signMessage({ message: variant })
      expect([variant, await refused({ message: variant, signature })]).toEqual([
        variant,
        { status: 400, code: 'invalid_siwe_message' },
      ])
    }
    // The standard form with every optional field, and without a statement, signs in.
    const full = siweMessage(stack, account, nonce, {
      notBefore: new Date(Date.now() - 60_000),
      requestId: 'req-1',
      resources: ['https://gateway.example/terms'],
    })
    const signed = await postSignIn(stack, {
      message: full,
      signature: await account.signMessage({ message: full }),
    })
    expect(signed.status).toBe(200)
    const bare = siweMessage(stack, account, await supplierNonce(stack), { statement: undefined })
    const again = await postSignIn(stack, {
      message: bare,
      signature: await account.signMessage({ message: bare }),
    })
    expect(again.status).toBe(200)
  })

  test('a signature by another wallet, or over another message, is refused', async () => {
    const account = newAccount()
    const message = siweMessage(stack, account, await supplierNonce(stack))
    const other = await newAccount().signMessage({ message })
    expect(await refused({ message, signature: other })).toEqual({
      status: 401,
      code: 'siwe_invalid_signature',
    })
    const signature = await account.signMessage({ message })
    const tampered = message.replace('Sign in to sell capacity.', 'Sign in to sell capacity!')
    expect(await refused({ message: tampered, signature })).toEqual({
      status: 401,
      code: 'siwe_invalid_signature',
    })
    // another address written into the signed message's place
    const swapped = message.replace(account.address, newAccount().address)
    expect(await refused({ message: swapped, signature })).toEqual({
      status: 401,
      code: 'siwe_invalid_signature',
    })
  })

  test('malformed bodies are 400s naming the problem', async () => {
    const account = newAccount()
    const message = siweMessage(stack, account, await supplierNonce(stack))
    const signature = await account.signMessage({ message })
    expect(await refused({ message: 'hello', signature })).toEqual({
      status: 400,
      code: 'invalid_siwe_message',
    })
    expect(await refused({ message, signature: 'not-hex' })).toEqual({
      status: 400,
      code: 'invalid_signature_format',
    })
    expect((await refused({ message })).status).toBe(400)
    expect((await refused({ message, signature, extra: 1 })).status).toBe(400)
    expect((await refused({ message: 'x'.repeat(5000), signature })).status).toBe(400)
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    const form = await fetch(`${stack.url}/v1/supplier/signin`, { method: 'POST', body: 'message=x' })
    expect(form.status).toBe(400)
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })

  test('a nonce lives five minutes in Redis and is alphanumeric', async () => {
    const nonce = await supplierNonce(stack)
    expect(nonce).toMatch(/^[A-Za-z0-9]{16,}$/)
    const ttl = await stack.store.pttl(stack.keys.siweNonce(nonce))
    expect(ttl).toBeGreaterThan(4 * 60_000)
    expect(ttl).toBeLessThanOrEqual(5 * 60_000)
  })
})

describe('nonce fuse', () => {
  test('past SVC_SIWE_NONCES_PER_MINUTE across replicas, a nonce is a 429 with Retry-After and none is stored', async () => {
    const fused = await startStack({ env: { SVC_SIWE_NONCES_PER_MINUTE: '3' } })
    try {
      const minute = Math.floor(Date.now() / 60_000)
      // this minute and the next at the cap, so a minute turning during the test changes nothing
      for (const m of [minute, minute + 1])
        await fused.store.set(fused.keys.siweNonceFuse(m), '3', 'PX', 120_000)
      const response = await fetch(`${fused.url}/v1/supplier/nonce`)
      expect(response.status).toBe(429)
      expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('nonce_rate_limited')
      const stored = await keysUnder(fused.store, `${fused.keys.prefix}:siwe:nonce:`)
      expect(stored).toEqual([])
    } finally {
      await fused.stop()
    }
  })
})

describe('nonce per client', () => {
  test('one client asking in a loop meets its own 429, and another client still gets nonces', async () => {
    // Listening on both stacks: 127.0.0.1 and ::1 reach it as two client addresses.
    const fused = await startStack({
      env: { HOST: '::', SVC_SIWE_NONCES_PER_MINUTE: '10', SVC_SIWE_NONCES_PER_CLIENT_PER_MINUTE: '3' },
    })
    try {
      const port = fused.url.split(':').at(-1)
      const nonce = (host: string) => fetch(`http://${host}:${port}/v1/supplier/nonce`)
      let refusal: Response | null = null
      for (let i = 0; i < 30 && refusal === null; i++) {
        const response = await nonce('127.0.0.1')
        if (response.status !== 200) refusal = response
      }
      if (refusal === null) throw new Error('never refused')
      expect(refusal.status).toBe(429)
      expect(Number(refusal.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      expect(((await refusal.json()) as { error: { code: string; type: string } }).error).toMatchObject({
        code: 'nonce_rate_limited',
        type: 'rate_limit_error',
      })
      const other = await nonce('[::1]')
      expect(other.status).toBe(200)
      expect(((await other.json()) as { nonce: string }).nonce).toMatch(/^[A-Za-z0-9]{8,}$/)
    } finally {
      await fused.stop()
    }
  })
})

describe('nonce lifetime', () => {
  test('a nonce past its time to live signs nobody in', async () => {
    const service = new SignInService(stack.store, stack.keys, stack.config.publicUrl, 1_000, 50)
    const nonce = await service.nonce()
    const account = newAccount()
    const message = siweMessage(stack, account, nonce)
    const signature = await account.signMessage({ message })
    // Redis expires it: wait until it is gone rather than for a fixed time
    await until(async () => (await stack.store.exists(stack.keys.siweNonce(nonce))) === 0)
    expect(await refused({ message, signature })).toEqual({ status: 401, code: 'siwe_nonce_invalid' })
  })
})
