// The store (src/redis/store.ts) over a single Redis and over a Cluster of three masters: the same
// paid pair (admit, clear) run through one interface leaves the same money in the same keys, read
// back through that interface; the Cluster's ran as FCALLs of the library on its masters, whose
// functions begin with the slot guard, and a single server's as FCALLs of the library without it.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import { moveSlot, slotOf } from '../../chaos/slots.ts'
import type { Admission } from '../../src/market/admission.ts'
import { OfferService } from '../../src/market/offers.ts'
import { isRedisUnavailable } from '../../src/redis/connection.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { startLocalRedis } from '../../src/redis/local-server.ts'
import { CLUSTER_LIBRARY, LIBRARY } from '../../src/redis/script-registry.ts'
import { runScript } from '../../src/redis/scripts.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { libraryNames } from '../helpers/function-libraries.ts'
import { pad, restartLoading } from '../helpers/loading-redis.ts'
import { admitFor, clearFor, type MarketFixture, postOffer, seedAccount } from '../helpers/market.ts'
import { prefixOn, type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.ts'
import { onCluster, ownRedis, testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

// The single-Redis side is one server by its nature: its own when the run's Redis is a Cluster.
if (onCluster()) await ownRedis()

let cluster: RedisCluster
const stores: Store[] = []
beforeAll(async () => {
  cluster = await startRedisCluster()
})
afterAll(() => {
  for (const store of stores) store.close()
  cluster?.stop()
})

async function open(url: string, name: string): Promise<Store> {
  const store = createStore(url, { name })
  stores.push(store)
  await store.whenReady(15_000)
  return store
}

/** A market under `prefix` on `store`: an account of 1 USDC and an offer at 40 cents. */
async function market(store: Store, prefix: string) {
  const keys = keyspace(prefix)
  const fx: MarketFixture = {
    store,
    keys,
    offers: new OfferService(store, keys, randomBytes(32)),
    close() {},
  }
  const accountId = await seedAccount(fx, 1_000_000)
  const offerId = await postOffer(fx, 40, 5_000_000)
  return { fx, keys, accountId, offerId }
}

/** One paid pair on `store`: an account of 1 USDC, an offer at 40 cents, 1,000 held, 700 burned. */
async function paidPair(store: Store) {
  const { fx, keys, accountId, offerId } = await market(store, testPrefix())
  const admitted = (await admitFor(fx, accountId)) as Admission
  const held = await store.hmget(keys.account(accountId), 'confirmed', 'held')
  const cleared = await clearFor(fx, admitted.attemptId, 700)
  const account = await store.hmget(keys.account(accountId), 'confirmed', 'held', 'spent')
  return {
    admitted: { offer: admitted.offerId === offerId, askCents: admitted.askCents },
    held,
    cleared: { charged: cleared.charged, burn: cleared.burn, confirmedAfter: cleared.confirmedAfter },
    account,
  }
}

test('a single-Redis store and a Cluster store run the same scripts and read the same money', async () => {
  const single = await open(testRedisUrl(), 'svc-test-store-single')
  const onCluster = await open(cluster.url, 'svc-test-store-cluster')
  const [a, b] = [await paidPair(single), await paidPair(onCluster)]
  expect(a.admitted.offer).toBe(true)
  expect(Number(a.held[1])).toBeGreaterThan(0)
  expect(a.cleared.charged).toBeGreaterThan(0)
  expect(Number(a.account[2])).toBe(a.cleared.charged)
  expect(b).toEqual(a)
  // The Cluster's scripts ran as functions of the guarded library loaded on its masters.
  const loaded = await Promise.all(
    cluster.nodes.map(async (node) => {
      const direct = new Redis(node.port, '127.0.0.1')
      try {
        return await libraryNames(direct)
      } finally {
        direct.disconnect()
      }
    }),
  )
  expect(loaded).toEqual([[CLUSTER_LIBRARY.name], [CLUSTER_LIBRARY.name], [CLUSTER_LIBRARY.name]])
  expect(CLUSTER_LIBRARY.code).toContain("'EXISTS', KEYS[1] .. '\\0slot-guard:a'")
  expect(single.lane).toBeDefined()
  expect(onCluster.lane).toBeUndefined()
}, 60_000)

test("on a Cluster the scripts go over a native connection to their slot's master; one sent to a slot that moved is passed on and followed", async () => {
  const [source, target] = cluster.nodes
  const store = await open(cluster.url, 'svc-test-cluster-lane')
  const { fx, keys, accountId } = await market(store, await prefixOn(source!))
  const scriptsOn = async (port: number) => {
    const direct = new Redis(port, '127.0.0.1')
    try {
      const list = String(await direct.client('LIST'))
      return list.split('\n').filter((line) => line.includes(' name=svc-test-cluster-lane-scripts '))
    } finally {
      direct.disconnect()
    }
  }
  // The lane connects on first use; until then ioredis carries the scripts.
  await until(async () => {
    await clearFor(fx, ((await admitFor(fx, accountId)) as Admission).attemptId, 700)
    return (await scriptsOn(source!.port)).some((line) => / cmd=fcall /.test(line))
  })
  // The market's slot moved whole to another master: the lane's map is stale until ioredis meets
  // the MOVED and reads the map again, and the first script there is passed to ioredis and served.
  const slot = await slotOf(cluster, keys.base)
  await moveSlot(cluster, slot, source!, target!, { batches: 1, between: async () => {} })
  const moved = (await admitFor(fx, accountId)) as Admission
  expect(moved.attemptId).toBeString()
  const account = async () => await store.hmget(keys.account(accountId), 'held', 'spent')
  const [held, spent] = (await account()).map(Number)
  expect(held).toBe(moved.holdUsdc)
  const cleared = await clearFor(fx, moved.attemptId, 700)
  expect((await account()).map(Number)).toEqual([0, spent! + cleared.charged])
  // And the lane serves the slot from its new master.
  await until(async () => {
    await clearFor(fx, ((await admitFor(fx, accountId)) as Admission).attemptId, 700)
    return (await scriptsOn(target!.port)).some((line) => / cmd=fcall /.test(line))
  })
  await moveSlot(cluster, slot, target!, source!, { batches: 1, between: async () => {} })
}, 60_000)

test("a single server loads the library without the slot guard: a paid pair asks Redis for no guard's EXISTS", async () => {
  const local = await startLocalRedis()
  const direct = new Redis(local.url)
  try {
    const store = await open(local.url, 'svc-test-store-unguarded')
    await until(() => store.lane !== undefined)
    const { fx, accountId } = await market(store, testPrefix())
    const before = await commandCalls(direct, ['exists', 'fcall'])
    const admitted = (await admitFor(fx, accountId)) as Admission
    expect((await clearFor(fx, admitted.attemptId, 700)).charged).toBeGreaterThan(0)
    // Two FCALLs and no EXISTS: none for a guard (and the attempt id's check is its record's HSETNX).
    expect((await commandCalls(direct, ['exists', 'fcall'])).map((n, i) => n - before[i]!)).toEqual([0, 2])
    expect(await libraryNames(direct)).toEqual([LIBRARY.name])
    expect(LIBRARY.name).not.toBe(CLUSTER_LIBRARY.name)
    expect(LIBRARY.code).not.toContain('slot-guard')
  } finally {
    direct.disconnect()
    await local.stop()
  }
}, 60_000)

/** How many times one server ran each of `commands` (INFO commandstats). */
async function commandCalls(node: Redis, commands: string[]): Promise<number[]> {
  const info = await node.info('commandstats')
  return commands.map((command) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0))
}

test('after a restart that loads the data set, scripts and reads come back together', async () => {
  const local = await startLocalRedis()
  const store = createStore(local.url, { name: 'svc-test-store-loading', failFast: true })
  stores.push(store)
  const keys = keyspace(testPrefix())
  const served = (call: () => Promise<unknown>) =>
    call().then(
      () => 'served',
      (error) => (isRedisUnavailable(error) ? 'away' : String(error)),
    )
  const script = () => served(() => runScript(store, 'capacity', [keys.base], { maxPriceCents: 80 }))
  const read = () => served(() => store.hgetall(keys.account('none')))
  let loading: Awaited<ReturnType<typeof restartLoading>> | null = null
  try {
    await store.whenReady(5_000)
    await until(() => store.lane !== undefined)
    await pad(local.url, 5_000)
    loading = await restartLoading(local)
    expect([await script(), await read()]).toEqual(['away', 'away'])
    // The lane's socket may be open again long before Redis has loaded: it serves no script then.
    expect(store.lane).toBeUndefined()
    await loading.finish()
    // The first script served after the load: the read right behind it finds the store up too.
    await until(async () => (await script()) === 'served', 5)
    expect(await read()).toBe('served')
    await until(() => store.lane !== undefined)
    expect(await script()).toBe('served')
  } finally {
    store.close()
    await loading?.stop()
    await local.stop()
  }
}, 60_000)

test('a script on a Cluster slot being moved writes nothing and is refused as the store away; it runs once the slot is whole', async () => {
  const [source, target] = cluster.nodes
  const store = await open(cluster.url, 'svc-test-slot-move')
  const { fx, keys, accountId } = await market(store, await prefixOn(source!))
  const onSource = new Redis(source!.port, '127.0.0.1', { lazyConnect: true })
  const onTarget = new Redis(target!.port, '127.0.0.1', { lazyConnect: true })
  try {
    const slot = Number(await onSource.cluster('KEYSLOT', keys.base))
    const pattern = `${keys.prefix.replace(/[{}]/g, (c) => `\\${c}`)}:*`
    const keysOn = async (node: Redis) => (await node.keys(pattern)).sort()
    const before = {
      source: await keysOn(onSource),
      account: await onSource.hgetall(keys.account(accountId)),
    }
    // The move begun, no key moved yet: the market's keys are all on the source, the attempt's
    // new ones on neither. Without the guard the admit ran on the target (sent there by ASK) and
    // found no account there, or on the source and stopped at its first missing key.
    await onTarget.cluster('SETSLOT', slot, 'IMPORTING', String(await onSource.cluster('MYID')))
    await onSource.cluster('SETSLOT', slot, 'MIGRATING', String(await onTarget.cluster('MYID')))
    const refused = await admitFor(fx, accountId).then(
      () => null,
      (error: unknown) => error,
    )
    expect(isRedisUnavailable(refused)).toBe(true)
    expect(await keysOn(onTarget)).toEqual([])
    expect(await keysOn(onSource)).toEqual(before.source)
    expect(await onSource.hgetall(keys.account(accountId))).toEqual(before.account)
    // The move called off: the slot whole on the source again, the same admit is served.
    await onTarget.cluster('SETSLOT', slot, 'STABLE')
    await onSource.cluster('SETSLOT', slot, 'STABLE')
    const admitted = (await admitFor(fx, accountId)) as Admission
    expect(admitted.attemptId).toBeString()
    expect(Number(await onSource.hget(keys.account(accountId), 'held'))).toBeGreaterThan(0)
  } finally {
    onSource.disconnect()
    onTarget.disconnect()
  }
}, 60_000)
