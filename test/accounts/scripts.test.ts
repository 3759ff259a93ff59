// The account scripts run directly against the real Redis: the cap, the ownership checks, the
// audit entry, and the invariant funded = confirmed + pending + held + spent.
import { afterAll, beforeEach, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { newAccountId } from '../../src/accounts/accounts.ts'
import { generateApiKey, MAX_ACTIVE_API_KEYS } from '../../src/accounts/api-keys.ts'
import { ACCOUNT_TABLE, type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { AccountCode } from '../../src/redis/result-codes.ts'
import { runScript } from '../../src/redis/scripts.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore } from '../../src/redis/store.ts'
import { randomWallet } from '../helpers/accounts.ts'
import { snapshotKeys, testPrefix, testRedisUrl } from '../helpers/stack.ts'

const store: Store = createStore(testRedisUrl(), { name: 'svc-test' })
afterAll(() => store.close())
let keys: Keyspace
beforeEach(() => {
  keys = keyspace(testPrefix())
})

async function createAccount(wallet = randomWallet(), accountId = newAccountId()) {
  const key = generateApiKey()
  const code = await runScript(
    store,
    'createAccount',
    [
      keys.account(accountId),
      keys.accountKeys(accountId),
      keys.wallets,
      keys.accounts,
      keys.apiKey(key.digest),
    ],
    {
      accountId,
      wallet,
      walletLower: wallet.toLowerCase(),
      maxPriceCents: 50,
      keyId: key.id,
      keyDigest: key.digest,
      keyName: 'default',
      keyPrefix: key.prefix,
      table: ACCOUNT_TABLE,
    },
  )
  return { code: Number(code), accountId, wallet, key }
}

async function mint(accountId: string, key = generateApiKey()) {
  const code = await runScript(
    store,
    'mintKey',
    [keys.account(accountId), keys.accountKeys(accountId), keys.apiKey(key.digest)],
    {
      accountId,
      keyId: key.id,
      keyDigest: key.digest,
      keyName: 'k',
      keyPrefix: key.prefix,
      maxKeys: MAX_ACTIVE_API_KEYS,
      limit: '',
      owner: '',
      callerKeyId: '',
      limitReset: '',
      table: ACCOUNT_TABLE,
    },
  )
  return { code: Number(code), key }
}

const revoke = async (accountId: string, keyId: string, digest: string) =>
  Number(
    await runScript(
      store,
      'revokeKey',
      [keys.accountKeys(accountId), keys.account(accountId), keys.apiKey(digest)],
      { keyId, keyDigest: digest, callerKeyId: '' },
    ),
  )

const credit = async (accountId: string, amount: string | number, note = 'by hand', idempotencyDigest = '') =>
  (await runScript(
    store,
    'credit',
    [keys.account(accountId), keys.audit, keys.creditKey(accountId, idempotencyDigest)],
    {
      accountId,
      amount,
      maxAmount: 1_000_000_000_000,
      note,
      actor: 'test',
      table: ACCOUNT_TABLE,
      idempotencyDigest,
    },
  )) as (number | string)[]

describe('create-account', () => {
  test('writes the account with zero balances, its first key, the wallet index and the set', async () => {
    const { code, accountId, wallet, key } = await createAccount()
    expect(code).toBe(AccountCode.Ok)
    const account = await store.hgetall(keys.account(accountId))
    expect(account).toMatchObject({ id: accountId, wallet, maxPriceCents: '50' })
    for (const field of ['confirmed', 'pending', 'held', 'spent', 'funded', 'writtenOff']) {
      expect(account[field]).toBe('0')
    }
    expect(Math.abs(Number(account.createdAt) - Date.now())).toBeLessThan(5_000)
    expect(await store.hgetall(keys.accountKeys(accountId))).toEqual({ [key.id]: key.digest })
    expect(await store.hgetall(keys.apiKey(key.digest))).toEqual({
      id: key.id,
      accountId,
      name: 'default',
      prefix: key.prefix,
      createdAt: account.createdAt!,
    })
    expect(await store.hget(keys.wallets, wallet.toLowerCase())).toBe(accountId)
    expect(await store.smembers(keys.accounts)).toEqual([accountId])
  })

  test('a wallet that has an account already gets -3 and nothing is written', async () => {
    const { wallet } = await createAccount()
    const before = await snapshotKeys(store, keys.prefix)
    expect((await createAccount(wallet)).code).toBe(AccountCode.WalletTaken)
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
  })

  test('an account id already in use gets -4 and nothing is written', async () => {
    const { accountId } = await createAccount()
    const before = await snapshotKeys(store, keys.prefix)
    expect((await createAccount(randomWallet(), accountId)).code).toBe(AccountCode.IdTaken)
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
  })
})

describe('mint-key', () => {
  test('mints up to the cap, then answers -2 and writes nothing', async () => {
    const { accountId } = await createAccount()
    for (let i = 1; i < MAX_ACTIVE_API_KEYS; i++) expect((await mint(accountId)).code).toBe(AccountCode.Ok)
    expect(await store.hlen(keys.accountKeys(accountId))).toBe(MAX_ACTIVE_API_KEYS)
    const before = await snapshotKeys(store, keys.prefix)
    const { code, key } = await mint(accountId)
    expect(code).toBe(AccountCode.KeyCap)
    expect(await store.exists(keys.apiKey(key.digest))).toBe(0)
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
  })

  test('revoking one below the cap makes room for exactly one more', async () => {
    const { accountId, key: first } = await createAccount()
    for (let i = 1; i < MAX_ACTIVE_API_KEYS; i++) await mint(accountId)
    expect(await revoke(accountId, first.id, first.digest)).toBe(AccountCode.Ok)
    expect((await mint(accountId)).code).toBe(AccountCode.Ok)
    expect((await mint(accountId)).code).toBe(AccountCode.KeyCap)
  })

  test('an unknown account gets -1, and an id naming some other key is not an account', async () => {
    expect((await mint(newAccountId())).code).toBe(AccountCode.NoAccount)
    const { accountId } = await createAccount()
    // acct:<id>:keys exists, but it is the keys hash, not an account.
    expect((await mint(`${accountId}:keys`)).code).toBe(AccountCode.NoAccount)
    expect(await store.hlen(keys.accountKeys(accountId))).toBe(1)
  })

  test('a digest already in use gets -4 and the existing key is untouched', async () => {
    const { accountId, key } = await createAccount()
    const before = await snapshotKeys(store, keys.prefix)
    const clash = { ...generateApiKey(), digest: key.digest }
    expect((await mint(accountId, clash)).code).toBe(AccountCode.IdTaken)
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
  })
})

describe('revoke-key', () => {
  test('deletes the lookup hash and the account entry together', async () => {
    const { accountId, key } = await createAccount()
    const second = (await mint(accountId)).key
    expect(await revoke(accountId, key.id, key.digest)).toBe(AccountCode.Ok)
    expect(await store.exists(keys.apiKey(key.digest))).toBe(0)
    expect(await store.hgetall(keys.accountKeys(accountId))).toEqual({ [second.id]: second.digest })
  })

  test('a foreign key id gets -5 and the other account keeps its key', async () => {
    const mine = await createAccount()
    const theirs = await createAccount()
    const before = await snapshotKeys(store, keys.prefix)
    expect(await revoke(mine.accountId, theirs.key.id, theirs.key.digest)).toBe(AccountCode.NoKey)
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
  })

  test("the mark holds its time; a mint ten minutes on sweeps it and the key's periods, never its spent or limit", async () => {
    const { accountId, key } = await createAccount()
    const account = keys.account(accountId)
    const revokedAt = async (id: string) => Number(await store.hget(account, `revoked:${id}`))
    const fields = (id: string) =>
      ['revoked', 'limit', 'reset', 'pstart', 'pspent', 'b100', 'held', 'inflight', 'spent'].map(
        (f) => `${f}:${id}`,
      )
    // Four keys revoked: long ago and idle, long ago with a request in flight, a minute ago, and by
    // an earlier build (a mark without a time).
    const [old, busy, young, earlier] = [
      (await mint(accountId)).key,
      (await mint(accountId)).key,
      key,
      (await mint(accountId)).key,
    ]
    for (const k of [old, busy, young, earlier]) {
      await store.hset(account, {
        [`limit:${k.id}`]: '900',
        [`reset:${k.id}`]: 'daily',
        [`pstart:${k.id}`]: '1',
        [`pspent:${k.id}`]: '7',
        [`b100:${k.id}`]: '1',
        [`held:${k.id}`]: '0',
        [`inflight:${k.id}`]: '0',
        [`spent:${k.id}`]: '123',
      })
      expect(await revoke(accountId, k.id, k.digest)).toBe(AccountCode.Ok)
      expect(Math.abs((await revokedAt(k.id)) - Date.now())).toBeLessThan(5_000)
    }
    const minutesAgo = (m: number) => String(Date.now() - m * 60_000)
    await store.hset(account, {
      [`revoked:${old.id}`]: minutesAgo(11),
      [`revoked:${busy.id}`]: minutesAgo(11),
      [`held:${busy.id}`]: '5',
      [`inflight:${busy.id}`]: '1',
      [`revoked:${young.id}`]: minutesAgo(1),
      [`revoked:${earlier.id}`]: '1',
    })
    const before = await store.hgetall(account)

    expect((await mint(accountId)).code).toBe(AccountCode.Ok)
    const after = await store.hgetall(account)
    // Long ago and idle: only what it spent and its limit are left (a late clear is charged within it).
    for (const f of fields(old.id))
      expect(after[f]).toBe(f.startsWith('spent:') ? '123' : f.startsWith('limit:') ? '900' : undefined)
    // In flight, or revoked too recently for every replica to have let go of its ids: untouched.
    for (const f of [...fields(busy.id), ...fields(young.id)]) expect(after[f]).toBe(before[f])
    // An earlier build's mark is given a time, from which it is kept as long.
    expect(Math.abs((await revokedAt(earlier.id)) - Date.now())).toBeLessThan(5_000)
    for (const f of fields(earlier.id).slice(1)) expect(after[f]).toBe(before[f])
  })

  test('a mint sweeps a page of a large hash, and mints go on from where the last stopped', async () => {
    const { accountId } = await createAccount()
    const account = keys.account(accountId)
    const long = String(Date.now() - 11 * 60_000)
    const marks: Record<string, string> = {}
    for (let i = 0; i < 3_000; i++) marks[`revoked:gone-${i}`] = long
    await store.hset(account, marks)
    const left = async () =>
      Object.keys(await store.hgetall(account)).filter((f) => f.startsWith('revoked:gone-')).length
    let last = (await mint(accountId)).key
    const afterOne = await left()
    expect(afterOne).toBeGreaterThan(0)
    expect(afterOne).toBeLessThan(3_000)
    // Each mint a page further (a key revoked between mints keeps the account below its cap).
    let mints = 1
    while ((await left()) > 0 && mints < 1_000) {
      expect(await revoke(accountId, last.id, last.digest)).toBe(AccountCode.Ok)
      last = (await mint(accountId)).key
      mints += 1
    }
    expect(await left()).toBe(0)
    // The keys revoked on the way, each a moment ago, keep their marks.
    const kept = Object.keys(await store.hgetall(account)).filter((f) => f.startsWith('revoked:'))
    expect(kept).toHaveLength(mints - 1)
  })

  test('an unknown id, a stale digest and a second revoke all get -5', async () => {
    const { accountId, key } = await createAccount()
    expect(await revoke(accountId, randomUUID(), key.digest)).toBe(AccountCode.NoKey)
    expect(await revoke(accountId, key.id, generateApiKey().digest)).toBe(AccountCode.NoKey)
    expect(await store.exists(keys.apiKey(key.digest))).toBe(1)
    expect(await revoke(accountId, key.id, key.digest)).toBe(AccountCode.Ok)
    expect(await revoke(accountId, key.id, key.digest)).toBe(AccountCode.NoKey)
  })
})

describe('touch-key', () => {
  test('sets lastUsedAt on a live key and never brings a revoked one back', async () => {
    const { accountId, key } = await createAccount()
    expect(Number(await runScript(store, 'touchKey', [keys.apiKey(key.digest)], []))).toBe(1)
    const lastUsedAt = Number(await store.hget(keys.apiKey(key.digest), 'lastUsedAt'))
    expect(Math.abs(lastUsedAt - Date.now())).toBeLessThan(5_000)
    await revoke(accountId, key.id, key.digest)
    expect(Number(await runScript(store, 'touchKey', [keys.apiKey(key.digest)], []))).toBe(0)
    expect(await store.exists(keys.apiKey(key.digest))).toBe(0)
  })
})

describe('credit', () => {
  test('credit twice: confirmed and funded add up, two audit entries, the invariant holds', async () => {
    const { accountId } = await createAccount()
    const first = await credit(accountId, 10_000_000, 'first')
    expect(first.slice(0, 7)).toEqual([1, '10000000', '0', '0', '0', '10000000', '0'])
    const second = await credit(accountId, 2_500_001, 'second')
    expect(second.slice(0, 7)).toEqual([1, '12500001', '0', '0', '0', '12500001', '0'])

    const account = await store.hgetall(keys.account(accountId))
    const sum = ['confirmed', 'pending', 'held', 'spent'].reduce((s, f) => s + BigInt(account[f]!), 0n)
    expect(sum).toBe(BigInt(account.funded!))

    const entries = await store.xrange(keys.audit, '-', '+')
    expect(entries.map(([id]) => id)).toEqual([String(first[7]), String(second[7])])
    const fields = Object.fromEntries(
      entries[1]![1].reduce<[string, string][]>((pairs, v, i, all) => {
        if (i % 2 === 0) pairs.push([v, all[i + 1]!])
        return pairs
      }, []),
    )
    expect(fields).toMatchObject({
      action: 'credit',
      accountId,
      amountMicroUsdc: '2500001',
      note: 'second',
      actor: 'test',
      confirmedAfter: '12500001',
      fundedAfter: '12500001',
    })
  })

  test('with an Idempotency-Key: retried, nothing more and the first entry; another amount, -11', async () => {
    const { accountId } = await createAccount()
    const digest = 'a'.repeat(64)
    const first = await credit(accountId, 3_000_000, 'by hand', digest)
    expect(first.slice(0, 7)).toEqual([1, '3000000', '0', '0', '0', '3000000', '0'])
    // Retried at once, and after another credit: the balances as they are now, the first's entry.
    expect(await credit(accountId, 3_000_000, 'by hand', digest)).toEqual([2, ...first.slice(1)])
    await credit(accountId, 1)
    const again = await credit(accountId, 3_000_000, 'by hand', digest)
    expect(again).toEqual([2, '3000001', '0', '0', '0', '3000001', '0', first[7]!])
    expect(await credit(accountId, 3_000_001, 'by hand', digest)).toEqual([AccountCode.IdempotencyKeyReused])
    // Many at once with one key: one credit.
    const other = 'b'.repeat(64)
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => credit(accountId, 500_000, 'race', other)),
    )
    expect(answers.filter((a) => a[0] === 1)).toHaveLength(1)
    expect(answers.filter((a) => a[0] === 2)).toHaveLength(7)
    expect(await store.hget(keys.account(accountId), 'funded')).toBe('3500001')
    expect(await store.xlen(keys.audit)).toBe(3)
  })

  test('an unknown account gets -1 and no audit entry', async () => {
    expect(await credit(newAccountId(), 1)).toEqual([AccountCode.NoAccount])
    const { accountId } = await createAccount()
    expect(await credit(`${accountId}:keys`, 1)).toEqual([AccountCode.NoAccount])
    expect(await store.exists(keys.audit)).toBe(0)
  })

  for (const amount of ['0', '-5', '1.5', '007', '', 'abc', '1e6', '1000000000001', '9999999999999999']) {
    test(`amount ${JSON.stringify(amount)} gets -6 and changes nothing`, async () => {
      const { accountId } = await createAccount()
      const before = await snapshotKeys(store, keys.prefix)
      expect(await credit(accountId, amount)).toEqual([AccountCode.BadAmount])
      expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
    })
  }

  test('the cap itself is accepted', async () => {
    const { accountId } = await createAccount()
    expect((await credit(accountId, '1000000000000'))[1]).toBe('1000000000000')
  })
})

describe('an account made before its table field', () => {
  /** The account as a build before the table field wrote it: every field but `table`, a listpack. */
  async function olderAccount() {
    const made = await createAccount()
    const key = keys.account(made.accountId)
    const { table: _, ...fields } = await store.hgetall(key)
    await store.del(key)
    await store.hset(key, fields)
    expect(await store.call('OBJECT', 'ENCODING', key)).toBe('listpack')
    return { ...made, key, fields }
  }

  const encoding = (key: string) => store.call('OBJECT', 'ENCODING', key)

  test('becomes a hash table at its next credit by hand, with every field kept', async () => {
    const { accountId, key, fields } = await olderAccount()
    expect((await credit(accountId, 5))[1]).toBe('5')
    expect(await encoding(key)).toBe('hashtable')
    expect(await store.hgetall(key)).toEqual({ ...fields, confirmed: '5', funded: '5', table: ACCOUNT_TABLE })
  })

  test('a refused credit leaves it as it was', async () => {
    const { accountId, key } = await olderAccount()
    const before = await snapshotKeys(store, keys.prefix)
    expect(await credit(accountId, '0')).toEqual([AccountCode.BadAmount])
    expect(await snapshotKeys(store, keys.prefix)).toEqual(before)
    expect(await encoding(key)).toBe('listpack')
  })

  test('becomes a hash table when a payment is credited to it, on one slot and held apart', async () => {
    const paid = await olderAccount()
    const paymentId = `84532:0x${randomUUID().replaceAll('-', '')}`
    const recorded = [
      keys.payment(paymentId),
      keys.authorization(`84532:auth:${paymentId}`),
      keys.paymentsInFlight,
      keys.paymentsUnconfirmed,
      keys.transactionPayments(paymentId),
    ]
    const args = {
      accountId: paid.accountId,
      amount: '7',
      paymentId,
      authorizationId: `84532:auth:${paymentId}`,
      blockNumber: '1',
      payer: paid.wallet,
      table: ACCOUNT_TABLE,
    }
    expect(await runScript(store, 'creditPayment', [...recorded, paid.key], args)).toEqual([1, '7', '7'])
    expect(await encoding(paid.key)).toBe('hashtable')

    const apart = await olderAccount()
    const pending = await runScript(
      store,
      'creditPending',
      [apart.key, keys.accountPayments(apart.accountId)],
      { accountId: apart.accountId, paymentId, amount: '9', table: ACCOUNT_TABLE },
    )
    expect(pending).toEqual([1, '9', '9'])
    expect(await encoding(apart.key)).toBe('hashtable')
  })

  test("becomes a hash table when it mints a key; a mint naming no table (a supplier's) adds none", async () => {
    const { accountId, key } = await olderAccount()
    const fresh = generateApiKey()
    const untabled = await runScript(
      store,
      'mintKey',
      [key, keys.accountKeys(accountId), keys.apiKey(fresh.digest)],
      {
        accountId,
        keyId: fresh.id,
        keyDigest: fresh.digest,
        keyName: 'k',
        keyPrefix: fresh.prefix,
        maxKeys: MAX_ACTIVE_API_KEYS,
        limit: '',
        owner: '',
        callerKeyId: '',
        limitReset: '',
        table: '',
      },
    )
    expect(Number(untabled)).toBe(AccountCode.Ok)
    expect(await store.hexists(key, 'table')).toBe(0)
    expect(await encoding(key)).toBe('listpack')
    expect((await mint(accountId)).code).toBe(AccountCode.Ok)
    expect(await encoding(key)).toBe('hashtable')
    expect(await store.hget(key, 'table')).toBe(ACCOUNT_TABLE)
  })
})
