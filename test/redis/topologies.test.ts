// The same gateway on a Redis Cluster and behind Sentinel: real redis-server processes in each
// mode, a paid chat completion cleared through the same scripts, and the audit clean. The one
// hash tag of the key prefix is what lets every script run on a Cluster.
import { afterAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import { auditMarket } from '../../src/market/audit.ts'
import { createRedis, whenReady } from '../../src/redis/connection.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { freePort } from '../../src/redis/local-server.ts'
import { parseRedisTarget } from '../../src/redis/target.ts'
import { keyFetch } from '../helpers/accounts.ts'
import { balances, fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { redisCli, redisServer, startRedisCluster, until } from '../helpers/redis-cluster.ts'
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

describe('Cluster', () => {
  test('three masters: the gateway admits, clears and audits across them', async () => {
    const redisCluster = await startRedisCluster()
    stops.push(redisCluster.stop)
    const url = redisCluster.url
    const stack = await startStack({ env: { REDIS_URL: url } })
    // The helpers read balances through stack.redis: point it at the cluster too.
    const cluster = createRedis(url, { name: 'svc-test-cluster' })
    await whenReady(cluster, 10_000)
    try {
      const probe = { ...stack, redis: cluster }
      const { buyer, before } = await paidChats(probe)
      const after = await balances(probe, buyer.accountId)
      expect(after.confirmed).toBeLessThan(before.confirmed)
      expect(after.spent).toBe(before.confirmed - after.confirmed)
      expect(await auditMarket(cluster, keyspace(stack.config.redisPrefix))).toEqual([])
    } finally {
      cluster.disconnect()
      await stack.stop()
    }
  }, 60_000)
})

describe('Sentinel', () => {
  test('a master found through a sentinel: the gateway admits and clears', async () => {
    const master = redisServer(['--appendonly', 'no'])
    stops.push(master.stop)
    await until('master', async () => (await redisCli('-p', String(master.port), 'ping')) === 'PONG')
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
    const stack = await startStack({ env: { REDIS_URL: url } })
    const viaSentinel = createRedis(url, { name: 'svc-test-sentinel' })
    await whenReady(viaSentinel, 10_000)
    try {
      const probe = { ...stack, redis: viaSentinel }
      const { buyer, before } = await paidChats(probe)
      expect((await balances(probe, buyer.accountId)).confirmed).toBeLessThan(before.confirmed)
      // and it really is that master that holds the money
      const direct = createRedis(`redis://127.0.0.1:${master.port}`)
      expect(await direct.exists(stack.keys.account(buyer.accountId))).toBe(1)
      direct.disconnect()
      expect(await auditMarket(viaSentinel, keyspace(stack.config.redisPrefix))).toEqual([])
    } finally {
      viaSentinel.disconnect()
      await stack.stop()
    }
  }, 60_000)
})
