// A key's owner learned once per replica: its later admissions name the account and key ids and
// read no key record, and a key revoked meanwhile is refused by the mark on its account, at once.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import { AccountStore } from '../../src/accounts/accounts.ts'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import type { Admission } from '../../src/market/admission.ts'
import { KEY_OWNER_TTL_MS, KeyOwners } from '../../src/market/key-owners.ts'
import { OfferService } from '../../src/market/offers.ts'
import { marketSteps } from '../../src/market/steps.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { type LocalRedis, startLocalRedis } from '../../src/redis/local-server.ts'
import { AdmitCode } from '../../src/redis/result-codes.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { randomWallet } from '../helpers/accounts.ts'
import {
  admitFor,
  admitRequest,
  type MarketFixture,
  marketFixture,
  postOffer,
  seedAccount,
} from '../helpers/market.ts'
import { testPrefix } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

const owner = { accountId: 'acct_1', apiKeyId: 'key-1' }

describe('KeyOwners', () => {
  test('an owner is kept for a minute, then looked up again', () => {
    let now = 1_000
    const owners = new KeyOwners(() => now)
    owners.set('d1', owner)
    now += KEY_OWNER_TTL_MS - 1
    expect(owners.get('d1')).toEqual(owner)
    now += 1
    expect(owners.get('d1')).toBeUndefined()
  })

  test('a dropped owner is forgotten; past its bound, every owner is', () => {
    const owners = new KeyOwners()
    owners.set('d1', owner)
    owners.drop('d1')
    expect(owners.get('d1')).toBeUndefined()
    for (let i = 0; i < 10_000; i++) owners.set(`d${i}`, owner)
    expect(owners.get('d0')).toEqual(owner)
    owners.set('newest', owner)
    expect(owners.get('d0')).toBeUndefined()
    expect(owners.get('newest')).toEqual(owner)
  })
})

/** A key's records as lua/create-account.lua and mint-key.lua write them: its digest, its owner. */
async function mintedKey(fx: MarketFixture, accountId: string, keyId: string) {
  const digest = randomBytes(32).toString('hex')
  await fx.store.hset(fx.keys.apiKey(digest), {
    id: keyId,
    accountId,
    name: 'k',
    prefix: 'svc_test',
    createdAt: 1,
  })
  await fx.store.hset(fx.keys.accountKeys(accountId), keyId, digest)
  return digest
}

const revoke = (fx: MarketFixture, accountId: string, keyId: string, digest: string) =>
  runScript(
    fx.store,
    'revokeKey',
    [fx.keys.accountKeys(accountId), fx.keys.account(accountId), fx.keys.apiKey(digest)],
    { keyId, keyDigest: digest, callerKeyId: '' },
  )

describe('a revoked key named by its ids', () => {
  const fx = marketFixture()
  afterAll(() => fx.close())

  test('is refused by the mark revoke-key leaves on its account, nothing held; its sibling is admitted', async () => {
    await postOffer(fx, 40, 5_000_000)
    const accountId = await seedAccount(fx, 1_000_000)
    const revoked = await mintedKey(fx, accountId, 'key-r')
    await mintedKey(fx, accountId, 'key-live')
    expect(await revoke(fx, accountId, 'key-r', revoked)).toBe(1)
    expect(await fx.store.hget(fx.keys.account(accountId), 'revoked:key-r')).toBe('1')
    const before = await fx.store.hgetall(fx.keys.account(accountId))
    expect(await admitFor(fx, accountId, { apiKeyId: 'key-r' })).toEqual({ code: AdmitCode.UnknownKey })
    expect(await fx.store.hgetall(fx.keys.account(accountId))).toEqual(before)
    expect(await fx.store.zcard(fx.keys.leases)).toBe(0)
    expect((await admitFor(fx, accountId, { apiKeyId: 'key-live' })).code).toBe(AdmitCode.Admitted)
  })
})

// The steps on a Redis of their own: the command counts and the monitor below are theirs alone.
describe('steps', () => {
  let local: LocalRedis
  let direct: Redis
  let store: Store
  beforeAll(async () => {
    local = await startLocalRedis()
    direct = new Redis(local.url)
    store = createStore(local.url, { name: 'svc-test-key-owners' })
    await until(() => store.lane !== undefined)
  })
  afterAll(async () => {
    store.close()
    direct.disconnect()
    await local.stop()
  })

  test("one slot: a key's later admissions read no key record; revoked, the next is refused and the one after asks by digest", async () => {
    const keys = keyspace(testPrefix())
    const fx: MarketFixture = {
      store,
      keys,
      offers: new OfferService(store, keys, randomBytes(32)),
      close() {},
    }
    await postOffer(fx, 40, 5_000_000)
    const accountId = await seedAccount(fx, 1_000_000)
    const digest = await mintedKey(fx, accountId, 'key-9')
    const steps = marketSteps(store, keys)
    const byDigest = () => steps.admit(admitRequest('', { apiKeyId: '', apiKeyDigest: digest }))
    const hmgets = async () =>
      Number(/cmdstat_hmget:calls=(\d+)/.exec(await direct.info('commandstats'))?.[1] ?? 0)

    // The first: resolved by its digest in the admission (the key's record, the account, the offer).
    let before = await hmgets()
    const first = (await byDigest()) as Admission
    expect([first.code, first.accountId, first.apiKeyId]).toEqual([AdmitCode.Admitted, accountId, 'key-9'])
    expect(Number(await store.hget(keys.apiKey(digest), 'lastUsedAt'))).toBeGreaterThan(0)
    expect((await hmgets()) - before).toBe(3)

    // The next: by the ids the first named, the account and the offer alone.
    before = await hmgets()
    const second = (await byDigest()) as Admission
    expect([second.code, second.accountId, second.apiKeyId]).toEqual([AdmitCode.Admitted, accountId, 'key-9'])
    expect((await hmgets()) - before).toBe(2)
    expect(await store.hget(keys.account(accountId), 'inflight:key-9')).toBe('2')

    // Revoked: refused at once by its ids (the account's read finds the mark), nothing held; the
    // next asks by its digest again (a read of the key's record, missed).
    expect(await revoke(fx, accountId, 'key-9', digest)).toBe(1)
    const held = await store.hmget(keys.account(accountId), 'held', 'inflight:key-9')
    const misses = async () => Number(/keyspace_misses:(\d+)/.exec(await direct.info('stats'))?.[1] ?? 0)
    before = await misses()
    expect(await byDigest()).toEqual({ code: AdmitCode.UnknownKey })
    expect((await misses()) - before).toBe(0)
    before = await misses()
    expect(await byDigest()).toEqual({ code: AdmitCode.UnknownKey })
    expect((await misses()) - before).toBe(1)
    expect(await store.hmget(keys.account(accountId), 'held', 'inflight:key-9')).toEqual(held)
    expect(await store.zcard(keys.leases)).toBe(2)
  })

  test("held apart: a key's admissions name it by its ids alone, and the hold reads no list of the account's keys", async () => {
    const keys = keyspace(testPrefix(), 'apart')
    const accounts = new AccountStore(store, keys)
    const { account, apiKey } = await accounts.create(randomWallet(), 50)
    await accounts.credit(account.id, '1.000000', 'test funds', 'test')
    await new OfferService(store, keys, randomBytes(32)).create({
      upstreamBaseUrl: 'http://127.0.0.1:1',
      upstreamApiKey: 'sk-test',
      askCents: 40,
      capacity: 5_000_000 as MicroDiem,
    })
    const steps = marketSteps(store, keys)
    const digest = digestApiKey(apiKey)
    // Every command Redis runs, those of the scripts with them: none reads the account's keys.
    const monitor = await direct.monitor()
    const seen: string[] = []
    monitor.on('monitor', (_time: string, args: string[]) => seen.push(args.join(' ')))
    for (let i = 0; i < 2; i++) {
      const admitted = await steps.admit(admitRequest('', { apiKeyId: '', apiKeyDigest: digest }))
      expect(admitted.code).toBe(AdmitCode.Admitted)
    }
    // Each admission's record is written by the hold, after its reads: both holds are in.
    await until(() => seen.filter((command) => command.startsWith('HSETNX')).length === 2)
    expect(seen.filter((command) => command.includes(keys.accountKeys(account.id)))).toEqual([])
    monitor.disconnect()
    await steps.close()
  })
})
