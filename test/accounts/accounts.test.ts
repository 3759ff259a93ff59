// The account services against the real Redis: wallet rules, the credit amount, the max price.
import { afterAll, beforeEach, describe, expect, test } from 'bun:test'
import { AccountStore, MAX_CREDIT, parseCreditAmount as parseCredit } from '../../src/accounts/accounts.ts'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import { ApiKeyStore } from '../../src/accounts/key-store.ts'
import { checksumWallet } from '../../src/accounts/wallet.ts'
import { ApiError } from '../../src/errors.ts'
import type { MicroUsdc } from '../../src/money/units.ts'
import { ACCOUNT_TABLE, type Keyspace, keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore } from '../../src/redis/store.ts'
import { randomWallet } from '../helpers/accounts.ts'
import { snapshotKeys, testPrefix, testRedisUrl } from '../helpers/stack.ts'

const store: Store = createStore(testRedisUrl(), { name: 'svc-test' })
afterAll(() => store.close())
let keys: Keyspace
let accounts: AccountStore
beforeEach(() => {
  keys = keyspace(testPrefix())
  accounts = new AccountStore(store, keys)
})

async function rejects(promise: Promise<unknown>, status: number, code?: string): Promise<ApiError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(ApiError)
  expect((error as ApiError).status).toBe(status)
  if (code) expect((error as ApiError).code).toBe(code)
  return error as ApiError
}

describe('wallets', () => {
  const checksummed = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'

  test('lower and upper case are checksummed; a wrong checksum or shape is refused', () => {
    expect(checksumWallet(checksummed.toLowerCase())).toBe(checksummed)
    expect(checksumWallet(`0x${checksummed.slice(2).toUpperCase()}`)).toBe(checksummed)
    expect(checksumWallet(checksummed)).toBe(checksummed)
    expect(checksumWallet('0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed')).toBeNull()
    for (const bad of [
      '',
      '0x',
      '5aaeb6053f3e94c9b9a09f33669435e7ef1beaed',
      '0x123',
      `0x${'g'.repeat(40)}`,
    ]) {
      expect(checksumWallet(bad)).toBeNull()
    }
  })

  test('stored checksummed, one account per wallet whatever its case', async () => {
    const { account } = await accounts.create(checksummed.toLowerCase(), 50)
    expect(account.wallet).toBe(checksummed)
    await rejects(accounts.create(checksummed, 50), 409, 'wallet_taken')
    await rejects(accounts.create(`0x${checksummed.slice(2).toUpperCase()}`, 50), 409, 'wallet_taken')
    expect((await accounts.findByWallet(checksummed.toLowerCase()))?.id).toBe(account.id)
    expect(await store.scard(keys.accounts)).toBe(1)
  })

  test('a bad wallet is a 400 and writes nothing', async () => {
    await rejects(accounts.create('0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', 50), 400)
    expect(await snapshotKeys(store, keys.prefix)).toEqual({})
  })
})

describe('create', () => {
  test('the account id is acct_ and 96 random bits; the first key resolves to it', async () => {
    const { account, apiKey } = await accounts.create(randomWallet(), 42)
    expect(account.id).toMatch(/^acct_[0-9a-f]{24}$/)
    expect(account.maxPriceCents).toBe(42)
    const zero = 0 as MicroUsdc
    expect(account.balances).toEqual({
      confirmed: zero,
      pending: zero,
      held: zero,
      spent: zero,
      funded: zero,
      writtenOff: zero,
    })
    const key = await new ApiKeyStore(store, keys).resolve(digestApiKey(apiKey))
    expect(key).toMatchObject({ accountId: account.id, name: 'default', prefix: apiKey.slice(0, 12) })
    // Only the digest is stored: the plaintext appears in no key or value.
    for (const [name, dump] of Object.entries(await snapshotKeys(store, keys.prefix))) {
      expect(name).not.toContain(apiKey)
      expect(Buffer.from(dump, 'hex').toString('latin1')).not.toContain(apiKey.slice(4))
    }
  })

  test("the account hash is a hash table from its first write, and the account's view is only its own fields", async () => {
    const { account } = await accounts.create(randomWallet(), 50)
    const key = keys.account(account.id)
    // Past the server's limit for a listpack value: the hash is a table, found by hash per field.
    const [, limit] = (await store.call('CONFIG', 'GET', 'hash-max-listpack-value')) as [string, string]
    expect(ACCOUNT_TABLE.length).toBeGreaterThan(Number(limit))
    expect(await store.hget(key, 'table')).toBe(ACCOUNT_TABLE)
    expect(await store.call('OBJECT', 'ENCODING', key)).toBe('hashtable')
    expect(Object.keys((await accounts.get(account.id))!).sort()).toEqual([
      'balances',
      'createdAt',
      'id',
      'maxPriceCents',
      'wallet',
    ])
  })

  test('the first key takes the name it is given, else "default"', async () => {
    const { apiKey } = await accounts.create(randomWallet(), 50, 'laptop')
    const key = await new ApiKeyStore(store, keys).resolve(digestApiKey(apiKey))
    expect(key?.name).toBe('laptop')
  })
})

describe('credit amounts', () => {
  test('positive decimal strings with at most 6 decimals, up to 1,000,000 USDC', () => {
    const parseCreditAmount = (text: string) => parseCredit(text) as number | null
    expect(parseCreditAmount('10.000000')).toBe(10_000_000)
    expect(parseCreditAmount('10')).toBe(10_000_000)
    expect(parseCreditAmount('0.000001')).toBe(1)
    expect(parseCreditAmount('1000000')).toBe(MAX_CREDIT)
    expect(parseCreditAmount('1000000.000000')).toBe(MAX_CREDIT)
    for (const bad of [
      '0',
      '0.000000',
      '-1',
      '+1',
      '1.0000001',
      '1000000.000001',
      '10000000',
      '1e3',
      ' 10',
      '10 ',
      '10.',
      '.5',
      '',
      '1,5',
      'NaN',
    ]) {
      expect(parseCreditAmount(bad)).toBeNull()
    }
  })

  test('a bad amount, a long note or an unknown account changes nothing', async () => {
    const { account } = await accounts.create(randomWallet(), 50)
    const before = await snapshotKeys(store, keys.prefix)
    await rejects(accounts.credit(account.id, '1.0000001', '', 'test'), 400, 'invalid_amount')
    await rejects(accounts.credit(account.id, '1', 'x'.repeat(501), 'test'), 400)
    await rejects(accounts.credit('acct_000000000000000000000000', '1', '', 'test'), 404, 'account_not_found')
    await rejects(accounts.credit('nope', '1', '', 'test'), 404, 'account_not_found')
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
  })
})

describe('max price', () => {
  test('30 to 80 is set as is; anything else is a 400 and nothing changes', async () => {
    const { account } = await accounts.create(randomWallet(), 50)
    await accounts.setMaxPrice(account.id, 30)
    expect((await accounts.require(account.id)).maxPriceCents).toBe(30)
    await accounts.setMaxPrice(account.id, 80)
    const before = await snapshotKeys(store, keys.prefix)
    for (const bad of [29, 81, 50.5, Number.NaN, 0, -50]) {
      await rejects(accounts.setMaxPrice(account.id, bad), 400, 'invalid_max_price')
    }
    await rejects(accounts.setMaxPrice('acct_000000000000000000000000', 50), 404)
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
  })
})

describe('a key revoked after its request was authenticated', () => {
  // Another replica revoked the calling key between this request's auth and its script: the
  // script, reading the account's keys in the same step as it acts, refuses it as auth would.
  test('mints, changes and revokes nothing: 401 invalid_api_key, nothing changed', async () => {
    const { account } = await accounts.create(randomWallet(), 50)
    const apiKeys = new ApiKeyStore(store, keys)
    const caller = await apiKeys.mint(account.id, 'caller', 5_000_000 as MicroUsdc)
    const sibling = await apiKeys.mint(account.id, 'sibling', 1_000_000 as MicroUsdc)
    await apiKeys.revoke(account.id, caller.id)
    const before = await snapshotKeys(store, keys.prefix)
    await rejects(apiKeys.mint(account.id, 'escape', 1_000 as MicroUsdc, caller.id), 401, 'invalid_api_key')
    await rejects(
      apiKeys.change(account.id, sibling.id, { name: 'renamed' }, caller.id),
      401,
      'invalid_api_key',
    )
    await rejects(apiKeys.revoke(account.id, sibling.id, caller.id), 401, 'invalid_api_key')
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
  })
})
