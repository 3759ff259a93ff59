// The same gateway on a Redis Cluster and behind Sentinel: real redis-server processes in each
// mode, a paid chat completion cleared through the same scripts, and the audit clean; on the
// Cluster, `svc-gateway audit` run as a fresh process too. The one hash tag of the key prefix is
// what lets every script run on a Cluster.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import Redis from 'ioredis'
import { auditAll } from '../../src/cli/audit.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { freePort } from '../../src/redis/local-server.ts'
import { CLUSTER_LIBRARY } from '../../src/redis/script-registry.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { parseRedisTarget } from '../../src/redis/target.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { runCli } from '../helpers/cli.ts'
import { metricValue } from '../helpers/metrics.ts'
import {
  prefixOn,
  type RedisCluster,
  type RedisServer,
  redisCli,
  redisServer,
  startRedisCluster,
  until,
} from '../helpers/redis-cluster.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

// The sentinel and its folder; the redis servers and the Cluster stop through `stops`.
const processes: Subprocess[] = []
const dirs: string[] = []
const stops: (() => void)[] = []
afterAll(() => {
  for (const stop of stops) stop()
  for (const p of processes) p.kill('SIGKILL')
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** The clears that waited for replicas (SVC_CLEAR_REPLICAS), by outcome, from /metrics. */
async function replicaWaits(stack: TestStack): Promise<{ replicated: number; short: number }> {
  const count = (outcome: string) => metricValue(stack, `svc_clear_replica_waits_total{outcome="${outcome}"}`)
  const [replicated, timedOut, failed] = await Promise.all([
    count('replicated'),
    count('timed_out'),
    count('failed'),
  ])
  return { replicated, short: timedOut + failed }
}

/** A buffered and a streamed paid completion through the stack; returns the buyer's balances before. */
async function paidChats(stack: TestStack) {
  await simOffer(stack, 40)
  const buyer = await fundedBuyer(stack)
  const before = await balances(stack, buyer.accountId)
  for (const stream of [false, true]) {
    const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
      method: 'POST',
      json: { model: 'llama-3.3-70b', stream, messages: [{ role: 'user', content: 'hi' }] },
    })
    expect(response.status).toBe(200)
    const text = await response.text()
    if (stream) expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true)
  }
  return { buyer, before }
}

describe('REDIS_URL forms', () => {
  test('parse: one server, sentinel with a password, cluster over TLS', () => {
    expect(parseRedisTarget('redis://h:1')).toEqual({ kind: 'single', url: 'redis://h:1' })
    expect(parseRedisTarget('redis+sentinel://:p%40ss@a:26379,b:26380/main')).toEqual({
      kind: 'sentinel',
      nodes: [
        { host: 'a', port: 26379 },
        { host: 'b', port: 26380 },
      ],
      name: 'main',
      password: 'p@ss',
      tls: false,
    })
    expect(parseRedisTarget('rediss+cluster://a:7000')).toMatchObject({ kind: 'cluster', tls: true })
    expect(() => parseRedisTarget('redis+sentinel://a:1')).toThrow('master name')
    expect(() => parseRedisTarget('redis+cluster://a:port')).toThrow()
  })
})

/**
 * One account given 1000 micro-USDC by an operator's credit, with one admitted attempt holding 100
 * of them and 30 micro-DIEM of an offer, its in-flight counts set: sound when `funded` is 1000 and
 * the attempt `leased`.
 */
async function seedOpenAttempt(store: Store, keys: Keyspace, options: { funded: number; leased: boolean }) {
  await store.hset(keys.account('acct_1'), {
    id: 'acct_1',
    confirmed: 900,
    pending: 0,
    held: 100,
    spent: 0,
    funded: options.funded,
    writtenOff: 0,
    // what the attempt's API key holds (its limit counts it)
    'held:key_1': 100,
    // its requests in flight: the account's and the key's
    inflight: 1,
    'inflight:key_1': 1,
  })
  await store.xadd(keys.audit, '*', 'action', 'credit', 'accountId', 'acct_1', 'amountMicroUsdc', 1000)
  await store.sadd(keys.accounts, 'acct_1')
  await store.hset(keys.offer('offer_1'), {
    id: 'offer_1',
    capacity: 500,
    burned: 0,
    held: 30,
    inflight: 1,
    earned: 0,
    fees: 0,
  })
  await store.sadd(keys.offers, 'offer_1')
  await store.hset(keys.attempt('req_1.1'), {
    id: 'req_1.1',
    state: 'admitted',
    accountId: 'acct_1',
    keyId: 'key_1',
    offerId: 'offer_1',
    holdUsdc: 100,
    holdDiem: 30,
  })
  if (options.leased) await store.zadd(keys.leases, Date.now() + 60_000, 'req_1.1')
}

/** How many keys of a prefix one node holds, asked of that node alone. */
async function keysOn(node: RedisServer, prefix: string): Promise<number> {
  const direct = createStore(`redis://127.0.0.1:${node.port}`, { name: 'svc-test-direct' })
  try {
    return (await direct.keys(`${prefix.replace(/[{}]/g, (c) => `\\${c}`)}:*`)).length
  } finally {
    direct.close()
  }
}

/** Whether a master holds the gateway's function library (a Cluster's, guarded), and how many FCALLs and EVALSHAs it ran. */
async function scriptStats(port: number) {
  const direct = new Redis(port, '127.0.0.1', { lazyConnect: true })
  try {
    const libraries = (await direct.call(
      'FUNCTION',
      'LIST',
      'LIBRARYNAME',
      CLUSTER_LIBRARY.name,
    )) as unknown[]
    const info = await direct.info('commandstats')
    const calls = (command: string) =>
      Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0)
    return {
      library: libraries.length === 1,
      fcalls: calls('fcall'),
      evalshas: calls('evalsha') + calls('eval'),
    }
  } finally {
    direct.disconnect()
  }
}

describe('Cluster', () => {
  let redisCluster: RedisCluster
  beforeAll(async () => {
    redisCluster = await startRedisCluster()
    stops.push(redisCluster.stop)
  })

  test('three masters: the gateway admits, clears and audits across them', async () => {
    const url = redisCluster.url
    const stack = await startStack({
      env: { REDIS_URL: url, SVC_CLEAR_REPLICAS: '1', SVC_CLEAR_REPLICAS_WAIT_MS: '5000' },
    })
    // The helpers read balances through stack.store: point it at the cluster too.
    const cluster = createStore(url, { name: 'svc-test-cluster' })
    await cluster.whenReady(10_000)
    try {
      const probe = { ...stack, store: cluster }
      const { buyer, before } = await paidChats(probe)
      const after = await balances(probe, buyer.accountId)
      expect(after.confirmed).toBeLessThan(before.confirmed)
      expect(after.spent).toBe(before.confirmed - after.confirmed)
      expect(await auditAll(cluster, keyspace(stack.config.redisPrefix))).toEqual([])
      // The scripts ran as functions of the library loaded on every master, never as EVALSHA.
      const stats = await Promise.all(redisCluster.nodes.map((n) => scriptStats(n.port)))
      expect(stats.every((s) => s.library)).toBe(true)
      expect(stats.reduce((sum, s) => sum + s.fcalls, 0)).toBeGreaterThan(0)
      expect(stats.reduce((sum, s) => sum + s.evalshas, 0)).toBe(0)
    } finally {
      cluster.close()
      await stack.stop()
    }
  }, 60_000)

  test('svc-gateway audit, a fresh process: walks the attempts on masters other than the first', async () => {
    const [, second, third] = redisCluster.nodes
    const clean = await prefixOn(second!)
    const broken = await prefixOn(third!)
    const seeder = createStore(redisCluster.url, { name: 'svc-test-seed' })
    await seeder.whenReady(10_000)
    try {
      await seedOpenAttempt(seeder, keyspace(clean), { funded: 1000, leased: true })
      await seedOpenAttempt(seeder, keyspace(broken), { funded: 999, leased: false })
    } finally {
      seeder.close()
    }
    // Each keyspace really is all on its own master (7 keys clean, 6 broken: no lease), none on the first.
    expect(await Promise.all(redisCluster.nodes.map((n) => keysOn(n, clean)))).toEqual([0, 7, 0])
    expect(await Promise.all(redisCluster.nodes.map((n) => keysOn(n, broken)))).toEqual([0, 0, 6])

    const audit = (prefix: string) =>
      runCli(['audit'], { REDIS_URL: redisCluster.url, SVC_REDIS_PREFIX: prefix })
    // Sound only if the open attempt is read: its holds and counts are what the account and offer show.
    expect(await audit(clean)).toEqual({ code: 0, stdout: 'audit: every invariant holds\n', stderr: '' })
    expect(await audit(broken)).toEqual({
      code: 1,
      stdout: [
        'audit: attempt req_1.1: admitted but has no lease',
        'audit: account acct_1: funded 999 != confirmed + pending + held + spent 1000',
        'audit: account acct_1: funded 999 != its credited payments 0 + credits by hand 1000',
        'audit: 3 finding(s)',
        '',
      ].join('\n'),
      stderr: '',
    })
  }, 60_000)
})

describe('Sentinel', () => {
  test('a master found through a sentinel: the gateway admits and clears, each cost told once its replica has the clear', async () => {
    // A replica that links is synced at once, not after the default 5 s gathering of others.
    const master = redisServer(['--appendonly', 'no', '--repl-diskless-sync-delay', '0'])
    stops.push(master.stop)
    await until('master', async () => (await redisCli('-p', String(master.port), 'ping')) === 'PONG')
    const replica = redisServer(['--appendonly', 'no', '--replicaof', '127.0.0.1', String(master.port)])
    stops.push(replica.stop)
    await until('replica', async () =>
      (await redisCli('-p', String(master.port), 'info', 'replication')).includes('connected_slaves:1'),
    )
    const sentinelDir = mkdtempSync(join(tmpdir(), 'svc-sentinel-'))
    dirs.push(sentinelDir)
    const sentinelPort = freePort()
    const conf = join(sentinelDir, 'sentinel.conf')
    writeFileSync(
      conf,
      [
        `port ${sentinelPort}`,
        'bind 127.0.0.1',
        `dir ${sentinelDir}`,
        `sentinel monitor svcmain 127.0.0.1 ${master.port} 1`,
      ].join('\n'),
    )
    processes.push(Bun.spawn(['redis-server', conf, '--sentinel'], { stdout: 'ignore', stderr: 'ignore' }))
    await until('sentinel', async () =>
      (await redisCli('-p', String(sentinelPort), 'sentinel', 'get-master-addr-by-name', 'svcmain')).includes(
        String(master.port),
      ),
    )
    const url = `redis+sentinel://127.0.0.1:${sentinelPort}/svcmain`
    const stack = await startStack({
      env: { REDIS_URL: url, SVC_CLEAR_REPLICAS: '1', SVC_CLEAR_REPLICAS_WAIT_MS: '5000' },
    })
    const viaSentinel = createStore(url, { name: 'svc-test-sentinel' })
    await viaSentinel.whenReady(10_000)
    try {
      const probe = { ...stack, store: viaSentinel }
      const waitsBefore = await replicaWaits(stack)
      const { buyer, before } = await paidChats(probe)
      expect((await balances(probe, buyer.accountId)).confirmed).toBeLessThan(before.confirmed)
      // and it really is that master that holds the money
      const direct = createStore(`redis://127.0.0.1:${master.port}`)
      expect(await direct.exists(stack.keys.account(buyer.accountId))).toBe(1)
      direct.close()
      // Each cost was told once the replica had its clear: the replica holds what was spent.
      const onReplica = createStore(`redis://127.0.0.1:${replica.port}`)
      const spent = await viaSentinel.hget(stack.keys.account(buyer.accountId), 'spent')
      expect(Number(spent)).toBeGreaterThan(0)
      expect(await onReplica.hget(stack.keys.account(buyer.accountId), 'spent')).toBe(spent)
      onReplica.close()
      // Both chats' clears (buffered and streamed) waited, and the replica answered each time.
      const waitsAfter = await replicaWaits(stack)
      expect(waitsAfter.replicated - waitsBefore.replicated).toBe(2)
      expect(waitsAfter.short).toBe(waitsBefore.short)
      expect(await auditAll(viaSentinel, keyspace(stack.config.redisPrefix))).toEqual([])
    } finally {
      viaSentinel.close()
      await stack.stop()
    }
  }, 60_000)
})
