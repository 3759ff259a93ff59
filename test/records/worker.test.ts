// The write-behind worker against a real Redis: a consumer killed between read and ack leaves its
// entries pending; another claims them (XAUTOCLAIM) and each request is copied once, stats too.
// Trimming by retention never drops an entry the group has not copied.
import { afterAll, beforeEach, describe, expect, test } from 'bun:test'
import type Redis from 'ioredis'
import { createLogger } from '../../src/logger.ts'
import { AdmitCode } from '../../src/market/result-codes.ts'
import { type Admission, clear } from '../../src/market/settlement.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { utcDay } from '../../src/records/days.ts'
import { recordRefusal } from '../../src/records/refusals.ts'
import { RECORDS_GROUP, RecordsWorker, type WorkerOptions } from '../../src/records/worker.ts'
import { createRedis } from '../../src/redis/connection.ts'
import { admitFor, type MarketFixture, marketFixture, postOffer, seedAccount } from '../helpers/market.ts'
import { testRedisUrl } from '../helpers/stack.ts'

let fx: MarketFixture
const connections: Redis[] = []
const fixtures: MarketFixture[] = []
beforeEach(() => {
  fx = marketFixture()
  fixtures.push(fx)
})
afterAll(() => {
  for (const f of fixtures) f.close()
  for (const c of connections) c.disconnect()
})

const logger = createLogger('silent')

function worker(
  consumer: string,
  options: Partial<WorkerOptions> = {},
): { worker: RecordsWorker; kill(): void } {
  const redis = createRedis(testRedisUrl(), { name: `svc-test-records-${consumer}` })
  connections.push(redis)
  const w = new RecordsWorker(
    redis,
    fx.keys,
    {
      consumer,
      batchSize: 100,
      blockMs: 10,
      claimIdleMs: 50,
      streamRetentionMs: 3_600_000,
      recordRetentionDays: 30,
      ...options,
    },
    logger,
  )
  return { worker: w, kill: () => redis.disconnect() }
}

const ref = (i: number) => `sr_${String.fromCharCode(97 + i).repeat(20)}`

/** `count` requests served through the real admit and clear scripts: each ends one attempt. */
async function servedRequests(count: number, from = 0): Promise<string> {
  await postOffer(fx, 40, 50_000_000, { maxInFlight: 1_000 })
  const acct = await seedAccount(fx, 10_000_000)
  for (let i = from; i < from + count; i++) {
    const result = await admitFor(fx, acct, { attemptId: `${ref(i)}.1` })
    expect(result.code).toBe(AdmitCode.Admitted)
    await clear(fx.redis, fx.keys, {
      attemptId: (result as Admission).attemptId,
      burn: 500 as MicroDiem,
      feeBps: 0,
      upstreamBalanceAfter: null,
      inputTokens: 3,
      outputTokens: 4,
      estimated: false,
      outcome: 'completed',
    })
  }
  return acct
}

const today = async () => {
  const [seconds] = await fx.redis.time()
  return utcDay(Number(seconds) * 1000)
}
const pending = async () => ((await fx.redis.xpending(fx.keys.attemptsEnded, RECORDS_GROUP)) as [number])[0]

describe('a worker killed between read and ack', () => {
  test('before it copied anything: another claims its entries and copies each once', async () => {
    const acct = await servedRequests(5)
    const a = worker('a')
    await a.worker.ensureGroup()
    expect(await a.worker.read()).toHaveLength(5)
    a.kill()
    expect(await pending()).toBe(5)

    const b = worker('b')
    expect(await b.worker.step()).toBe(0) // not idle long enough yet: nothing is taken from a
    await Bun.sleep(80)
    expect(await b.worker.step()).toBe(5)
    expect(await pending()).toBe(0)
    for (let i = 0; i < 5; i++) {
      const record = await fx.redis.hgetall(fx.keys.request(ref(i)))
      expect(record).toMatchObject({ accountId: acct, s1: 'cleared', model: 'llama-3.3-70b' })
      expect(JSON.parse(record.a1!)).toMatchObject({ n: 1, end: 'cleared', charged: 200, burn: 500 })
    }
    expect(await fx.redis.hgetall(fx.keys.statsDay(await today()))).toEqual({ 'llama-3.3-70b': '5' })
  })

  test('after it copied but before its ack: the claimer copies nothing twice', async () => {
    await servedRequests(4)
    const a = worker('a')
    await a.worker.ensureGroup()
    const read = await a.worker.read()
    expect(await a.worker.write(read)).toBe(4)
    a.kill()

    const b = worker('b')
    await Bun.sleep(80)
    const claimed = await b.worker.claim()
    expect(claimed.map(([id]) => id)).toEqual(read.map(([id]) => id))
    expect(await b.worker.copy(claimed)).toBe(0)
    expect(await pending()).toBe(0)
    expect(await fx.redis.hgetall(fx.keys.statsDay(await today()))).toEqual({ 'llama-3.3-70b': '4' })
  })

  test('two live workers share the stream: each entry is copied by one of them', async () => {
    await servedRequests(20)
    const a = worker('a', { batchSize: 3 })
    const b = worker('b', { batchSize: 3 })
    await a.worker.ensureGroup()
    let copied = 0
    for (let i = 0; i < 5; i++)
      copied += (await Promise.all([a.worker.step(), b.worker.step()])).reduce((x, y) => x + y)
    expect(copied).toBe(20)
    expect(await fx.redis.hgetall(fx.keys.statsDay(await today()))).toEqual({ 'llama-3.3-70b': '20' })
  })
})

describe('trim', () => {
  test('drops copied entries past retention, keeps what is pending or not yet read', async () => {
    await servedRequests(3)
    const a = worker('a', { streamRetentionMs: 0, batchSize: 2 })
    await a.worker.ensureGroup()
    expect(await a.worker.copy(await a.worker.read())).toBe(2) // entries 1-2 copied and acked
    const [third] = await a.worker.read() // entry 3 read, not acked
    await recordRefusal(fx.redis, fx.keys, {
      attemptId: `${ref(9)}.1`,
      accountId: 'acct_x',
      apiKeyId: 'key_x',
      requestId: 'req_x',
      model: 'llama-3.3-70b',
      errorCode: 'pool_empty',
    }) // entry 4, not read
    await Bun.sleep(5)
    await a.worker.trim()
    const left = (await fx.redis.xrange(fx.keys.attemptsEnded, '-', '+')).map(([id]) => id)
    expect(left).toHaveLength(2)
    expect(left[0]).toBe(third![0])
    expect(await a.worker.step()).toBe(1)
    expect(await a.worker.copy([third!])).toBe(1)
  })

  test('forgets consumers long gone with nothing pending, never one with entries pending', async () => {
    await servedRequests(2)
    const gone = worker('gone')
    await gone.worker.ensureGroup()
    expect(await gone.worker.step()).toBe(2) // read and acked: nothing pending
    const dead = worker('dead', { batchSize: 1 })
    await servedRequests(1, 2)
    expect(await dead.worker.read()).toHaveLength(1) // read, never acked
    const live = worker('live', { forgetIdleMs: 30 })
    await Bun.sleep(50)
    await live.worker.trim()
    const names = (
      (await fx.redis.xinfo('CONSUMERS', fx.keys.attemptsEnded, RECORDS_GROUP)) as string[][]
    ).map((c) => c[c.indexOf('name') + 1])
    expect(names).toEqual(['dead'])
  })
})
