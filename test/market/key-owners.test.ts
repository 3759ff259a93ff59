// A key's owner learned once per replica: its later admissions name the account and key ids and
// read no key record, and a key revoked meanwhile is refused by the mark on its account, at once.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import pino from 'pino'
import { AccountStore } from '../../src/accounts/accounts.ts'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import type { Admission } from '../../src/market/admission.ts'
import { KEY_OWNER_TTL_MS, KeyOwners } from '../../src/market/key-owners.ts'
import { OfferService } from '../../src/market/offers.ts'
import { startReaper } from '../../src/market/reaper.ts'
import { earlierBuildSeen, forgetReplica, REPLICA_ID, stampReaperPass } from '../../src/market/replicas.ts'
import { marketSteps } from '../../src/market/steps.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
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

  test('not kept: every owner kept is forgotten and none is kept until told again', () => {
    const owners = new KeyOwners()
    owners.set('d1', owner)
    owners.keep(false)
    expect([owners.kept, owners.get('d1')]).toEqual([false, undefined])
    owners.set('d2', owner)
    expect(owners.get('d2')).toBeUndefined()
    owners.keep(true)
    owners.set('d2', owner)
    expect([owners.kept, owners.get('d2')]).toEqual([true, owner])
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
    expect(
      Math.abs(Number(await fx.store.hget(fx.keys.account(accountId), 'revoked:key-r')) - Date.now()),
    ).toBeLessThan(5_000)
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

// A build from before the mark revokes a key by deleting its record and its entry in the account's
// list of keys (lua/revoke-key.lua then), and marks nothing on the account.
async function revokeAsEarlierBuild(
  store: Store,
  keys: Keyspace,
  accountId: string,
  keyId: string,
  digest: string,
) {
  await store.hdel(keys.accountKeys(accountId), keyId)
  await store.del(keys.apiKey(digest))
}

describe('a replica of an earlier build seen', () => {
  const fx = marketFixture()
  afterAll(() => fx.close())

  /** A market of its own on one slot: an offer, a funded account, a replica's steps. */
  async function oneSlotMarket() {
    const keys = keyspace(testPrefix())
    const own: MarketFixture = { ...fx, keys, offers: new OfferService(fx.store, keys, randomBytes(32)) }
    await postOffer(own, 40, 5_000_000)
    return { keys, own, accountId: await seedAccount(own, 1_000_000), steps: marketSteps(fx.store, keys) }
  }

  test('is a replica seen lately that never stamped itself as marking revoked keys', async () => {
    const keys = keyspace(testPrefix())
    await stampReaperPass(fx.store, keys, 0)
    expect(await earlierBuildSeen(fx.store, keys, 10_000)).toBe(false)
    // An earlier build's pass stamps the replicas alone.
    await fx.store.zadd(keys.replicas, Date.now(), 'earlier:1:abc')
    expect(await earlierBuildSeen(fx.store, keys, 10_000)).toBe(true)
    // Seen no longer: silent past the window, as a replica stopped or gone.
    await fx.store.zadd(keys.replicas, Date.now() - 60_000, 'earlier:1:abc')
    expect(await earlierBuildSeen(fx.store, keys, 10_000)).toBe(false)
    await forgetReplica(fx.store, keys)
    expect(await fx.store.zscore(keys.replicasMarking, REPLICA_ID)).toBeNull()
  })

  test('one slot: while it is seen, a key revoked by it is refused on the next request, nothing held', async () => {
    const { keys, own, accountId, steps } = await oneSlotMarket()
    const byDigest = (digest: string) => steps.admit(admitRequest('', { apiKeyId: '', apiKeyDigest: digest }))

    // Without it seen, such a revoke is not seen by a replica that named the key by its ids.
    const unseen = await mintedKey(own, accountId, 'key-a')
    expect((await byDigest(unseen)).code).toBe(AdmitCode.Admitted)
    await revokeAsEarlierBuild(fx.store, keys, accountId, 'key-a', unseen)
    expect((await byDigest(unseen)).code).toBe(AdmitCode.Admitted)

    // Seen (as a reaper pass tells it): the owners learned before are forgotten, none is kept after.
    const digest = await mintedKey(own, accountId, 'key-b')
    expect((await byDigest(digest)).code).toBe(AdmitCode.Admitted)
    steps.earlierBuildSeen(true)
    expect((await byDigest(digest)).code).toBe(AdmitCode.Admitted)
    await revokeAsEarlierBuild(fx.store, keys, accountId, 'key-b', digest)
    const held = await fx.store.hmget(keys.account(accountId), 'held', 'inflight:key-b')
    expect(await byDigest(digest)).toEqual({ code: AdmitCode.UnknownKey })
    expect(await byDigest(unseen)).toEqual({ code: AdmitCode.UnknownKey })
    expect(await fx.store.hmget(keys.account(accountId), 'held', 'inflight:key-b')).toEqual(held)

    // Gone again: a revoked key, looked up afresh by its digest, stays refused.
    steps.earlierBuildSeen(false)
    expect(await byDigest(digest)).toEqual({ code: AdmitCode.UnknownKey })
  })

  test("held apart: while it is seen, the hold checks the key against the account's keys", async () => {
    const keys = keyspace(testPrefix(), 'apart')
    const accounts = new AccountStore(fx.store, keys)
    const { account, apiKey } = await accounts.create(randomWallet(), 50)
    await accounts.credit(account.id, '1.000000', 'test funds', 'test')
    await new OfferService(fx.store, keys, randomBytes(32)).create({
      upstreamBaseUrl: 'http://127.0.0.1:1',
      upstreamApiKey: 'sk-test',
      askCents: 40,
      capacity: 5_000_000 as MicroDiem,
    })
    const steps = marketSteps(fx.store, keys)
    const digest = digestApiKey(apiKey)
    const keyId = (await fx.store.hget(keys.apiKey(digest), 'id'))!
    const admitted = () => steps.admit(admitRequest('', { apiKeyId: '', apiKeyDigest: digest }))
    expect((await admitted()).code).toBe(AdmitCode.Admitted)
    steps.earlierBuildSeen(true)
    expect((await admitted()).code).toBe(AdmitCode.Admitted)
    // The account's side of an earlier build's revoke (its list of keys) comes first: enough here.
    await fx.store.hdel(keys.accountKeys(account.id), keyId)
    expect(await admitted()).toEqual({ code: AdmitCode.UnknownKey })
    await steps.close()
  })

  test("each reaper pass tells the replica's steps", async () => {
    const { keys, own, accountId, steps } = await oneSlotMarket()
    const digest = await mintedKey(own, accountId, 'key-c')
    expect((await steps.admit(admitRequest('', { apiKeyId: '', apiKeyDigest: digest }))).code).toBe(
      AdmitCode.Admitted,
    )
    await fx.store.zadd(keys.replicas, Date.now(), 'earlier:2:def')
    let pass: (() => unknown) | undefined
    const stop = startReaper(
      fx.store,
      keys,
      steps,
      1_000,
      pino({ level: 'silent' }),
      undefined,
      (_ms, run) => {
        pass = run
        return () => {}
      },
    )
    pass!()
    // The pass under way finishes before the reaper stops.
    await stop()
    await revokeAsEarlierBuild(fx.store, keys, accountId, 'key-c', digest)
    expect(await steps.admit(admitRequest('', { apiKeyId: '', apiKeyDigest: digest }))).toEqual({
      code: AdmitCode.UnknownKey,
    })
  })

  /** One reaper pass of `steps` on `store`, run to its end. */
  async function onePass(store: Store, keys: Keyspace, steps: ReturnType<typeof marketSteps>) {
    let pass: (() => unknown) | undefined
    const stop = startReaper(store, keys, steps, 1_000, pino({ level: 'silent' }), undefined, (_ms, run) => {
      pass = run
      return () => {}
    })
    pass!()
    await stop()
  }

  /** A key of a one-slot market, admitted once by its digest: its steps now name it by its ids. */
  async function keyAdmittedOnce(keyId: string) {
    const { keys, own, accountId, steps } = await oneSlotMarket()
    const digest = await mintedKey(own, accountId, keyId)
    const admitted = () => steps.admit(admitRequest('', { apiKeyId: '', apiKeyDigest: digest }))
    expect((await admitted()).code).toBe(AdmitCode.Admitted)
    /** Revoked as an earlier build revokes it, then asked again. */
    const revokedThenAsked = async () => {
      await revokeAsEarlierBuild(fx.store, keys, accountId, keyId, digest)
      return admitted()
    }
    return { keys, steps, revokedThenAsked }
  }

  test('a pass whose reap fails still tells the steps of an earlier build', async () => {
    const { keys, steps, revokedThenAsked } = await keyAdmittedOnce('key-d')
    await fx.store.zadd(keys.replicas, Date.now(), 'earlier:3:fed')
    const failing = new Proxy(steps, {
      get: (target, name) =>
        name === 'reap' ? () => Promise.reject(new Error('reap failed')) : Reflect.get(target, name, target),
    })
    await onePass(fx.store, keys, failing)
    expect(await revokedThenAsked()).toEqual({ code: AdmitCode.UnknownKey })
  })

  test('an earlier build that stamps seldom, or on a clock behind, is still seen', async () => {
    const { keys, steps, revokedThenAsked } = await keyAdmittedOnce('key-f')
    // Its last stamp a minute old: past this replica's own seen window, within the earlier build's.
    await fx.store.zadd(keys.replicas, Date.now() - 60_000, 'earlier:4:slow')
    await onePass(fx.store, keys, steps)
    expect(await revokedThenAsked()).toEqual({ code: AdmitCode.UnknownKey })
  })

  test('a pass that cannot tell whether an earlier build runs names no key by its ids', async () => {
    const { keys, steps, revokedThenAsked } = await keyAdmittedOnce('key-e')
    // Only this build's replicas stamped; the check's own reads fail.
    const blind = new Proxy(fx.store, {
      get: (target, name) =>
        name === 'zrangebyscore'
          ? () => Promise.reject(new Error('connection lost'))
          : Reflect.get(target, name, target),
    })
    await onePass(blind, keys, steps)
    expect(await revokedThenAsked()).toEqual({ code: AdmitCode.UnknownKey })
  })
})
