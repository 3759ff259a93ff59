// The native script lane (src/redis/script-lane.ts) against a real redis-server: on a single Redis
// the scripts go through Bun's own client and answer exactly as through ioredis; a script Redis
// lost (restart, SCRIPT FLUSH) is sent again whole; a lane that is down hands its scripts to
// ioredis; and the lane's connection ends with the ioredis one.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes, randomUUID } from 'node:crypto'
import { clearFailure } from '../../src/inference/service.ts'
import { OfferService } from '../../src/market/offers.ts'
import type { MicroDiem } from '../../src/money/units.ts'
import { isRedisUnavailable } from '../../src/redis/connection.ts'
import { keyspace } from '../../src/redis/keys.ts'
import { startLocalRedis } from '../../src/redis/local-server.ts'
import { ScriptLane } from '../../src/redis/script-lane.ts'
import { SCRIPTS } from '../../src/redis/script-registry.ts'
import { runScript, type ScriptArgs } from '../../src/redis/scripts.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore } from '../../src/redis/store.ts'
import { type MarketFixture, marketFixture, postOffer, seedAccount } from '../helpers/market.ts'
import { ownRedis, testPrefix, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

// It reads and kills connections by name off the client list: a server of its own.
await ownRedis()

/** An admission's arguments by name: key-1 of `accountId`, a 1,000 micro-DIEM hold, no digest. */
const admitArgs = (attemptId: string, accountId: string): ScriptArgs<'admit'> => ({
  attemptId,
  accountId,
  apiKeyId: 'key-1',
  holdDiem: 1_000,
  keyCap: 10,
  accountCap: 10,
  leaseMs: 60_000,
  tried: '',
  defaultMaxPriceCents: 50,
  model: 'm',
  requestId: 'r',
  capGroup: '',
  capGroupCap: 0,
  apiKeyDigest: '',
  recordRetentionMs: 86_400_000,
  now: '',
})

let fx: MarketFixture
let observer: Store

beforeAll(async () => {
  fx = marketFixture()
  observer = createStore(testRedisUrl(), { name: 'svc-test-observer' })
  await fx.store.whenReady(5_000)
})
afterAll(() => {
  fx.close()
  observer.close()
})

/** The names of the connections Redis has right now. */
async function clientNames(): Promise<string[]> {
  const list = (await observer.client('LIST')) as string
  return list
    .split('\n')
    .map((line) => /name=(\S*)/.exec(line)?.[1] ?? '')
    .filter(Boolean)
}

async function laneUp(store: Store) {
  await until(() => store.lane !== undefined)
  expect(store.lane).toBeDefined()
}

describe('the native script lane', () => {
  test('a single Redis gets a lane, named after its connection, and scripts answer as through ioredis', async () => {
    await laneUp(fx.store)
    expect(await clientNames()).toContain('svc-test-market-scripts')
    const offerId = await postOffer(fx, 45, 5_000_000)
    const accountId = await seedAccount(fx, 1_000_000)
    const args = (attemptId: string) => admitArgs(attemptId, accountId)
    const first = randomUUID()
    const viaLane = (await runScript(fx.store, 'admit', [fx.keys.base], args(first))) as unknown[]
    // The same script as EVALSHA through ioredis, on a store of the other form.
    const evalsha = createStore(testRedisUrl(), { name: 'svc-test-evalsha', scriptForm: 'scripts' })
    const viaIoredis = (await runScript(evalsha, 'admit', [fx.keys.base], args(randomUUID())).finally(() =>
      evalsha.close(),
    )) as unknown[]
    expect(evalsha.lane).toBeUndefined()
    expect(viaLane[0]).toBe(1)
    expect(viaLane[1]).toBe(offerId)
    expect(viaLane.map((v) => typeof v)).toEqual(viaIoredis.map((v) => typeof v))
    expect(viaLane.slice(0, 5)).toEqual(viaIoredis.slice(0, 5))
    // A refusal (the attempt id used already) is a plain reply too, its code a number.
    expect(await runScript(fx.store, 'admit', [fx.keys.base], args(first))).toEqual([-10, accountId, 'key-1'])
  })

  test('after SCRIPT FLUSH a script is sent again whole and still runs', async () => {
    await laneUp(fx.store)
    const lane = fx.store.lane!
    await observer.script('FLUSH')
    const sha = new Bun.CryptoHasher('sha1').update(SCRIPTS.capacity.lua).digest('hex')
    expect(await observer.script('EXISTS', sha)).toEqual([0])
    // The market's scripts go as functions (functions.test.ts); EVALSHA is the lane's other way.
    const snapshot = await lane.run(SCRIPTS.capacity.lua, [fx.keys.base], [80])
    expect(Array.isArray(snapshot)).toBe(true)
    expect(await observer.script('EXISTS', sha)).toEqual([1])
  })

  test('a lane that is down hands its scripts to ioredis; it comes back by itself', async () => {
    await laneUp(fx.store)
    // Cut only the lane's connection: ioredis's own stays up.
    await observer.client('KILL', 'SKIPME', 'yes', 'ID', String(await laneClientId()))
    await until(() => fx.store.lane === undefined, 1)
    expect(fx.store.lane).toBeUndefined()
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        runScript(fx.store, 'capacity', [fx.keys.base], { maxPriceCents: 80 }),
      ),
    )
    for (const r of results) expect(Array.isArray(r)).toBe(true)
    await laneUp(fx.store)
  })

  test("a database in the URL is the lane's too: a script writes where ioredis reads", async () => {
    const store = createStore(`${testRedisUrl()}/5`, { name: 'svc-test-db5' })
    try {
      await store.whenReady(5_000)
      await laneUp(store)
      const keys = keyspace(testPrefix())
      const offers = new OfferService(store, keys, randomBytes(32))
      const offer = await offers.create({
        upstreamBaseUrl: 'http://127.0.0.1:1',
        upstreamApiKey: 'upstream-db5',
        askCents: 40,
        capacity: 1_000 as MicroDiem,
      })
      expect((await store.hgetall(keys.offer(offer.id))).askCents).toBe('40')
      expect(await observer.exists(keys.offer(offer.id))).toBe(0)
    } finally {
      store.close()
    }
  })

  test('a Redis on this machine reached over its Unix socket (redis+unix://): both connections there, scripts on the lane', async () => {
    const local = await startLocalRedis()
    const store = createStore(local.socketUrl, { name: 'svc-test-socket' })
    try {
      await store.whenReady(5_000)
      await laneUp(store)
      // The lane answers a script (an unknown account is refused by the admission itself)
      const keys = keyspace('svc:{socket}')
      const refused = (await runScript(
        store,
        'admit',
        [keys.base],
        admitArgs(randomUUID(), 'acct-none'),
      )) as unknown[]
      expect(refused[0]).toBe(-1)
      // Redis sees both connections on its socket, none over TCP
      const list = (await store.client('LIST')) as string
      const ours = list.split('\n').filter((line) => /name=svc-test-socket/.test(line))
      expect(ours.map((line) => /name=(\S+)/.exec(line)![1]).sort()).toEqual([
        'svc-test-socket',
        'svc-test-socket-scripts',
      ])
      for (const line of ours) expect(line).toContain(`laddr=${local.dir}/redis.sock`)
    } finally {
      store.close()
      await local.stop()
    }
  })

  test('a script and a command agree on whether the store is up while ioredis reconnects', async () => {
    const store = createStore(testRedisUrl(), { name: 'svc-test-together', failFast: true })
    try {
      await store.whenReady(5_000)
      await laneUp(store)
      // Redis drops the command connection, which dials again; the lane's socket stays open throughout.
      await observer.client('KILL', 'ID', String(await clientId('svc-test-together')))
      await until(() => !store.ready, 1)
      const read = store.get('svc-test:none').then(
        () => 'served',
        (error) => (isRedisUnavailable(error) ? 'away' : String(error)),
      )
      const script = runScript(store, 'touchKey', [`${testPrefix()}:apikey:none`], []).then(
        () => 'served',
        (error) => (isRedisUnavailable(error) ? 'away' : String(error)),
      )
      expect(await read).toBe('away')
      expect(await script).toBe('away')
      await store.whenReady(5_000)
      await laneUp(store)
    } finally {
      store.close()
    }
  })

  test('close() ends both connections: none of the store is left in CLIENT LIST', async () => {
    const store = createStore(testRedisUrl(), { name: 'svc-test-short-lived' })
    await store.whenReady(5_000)
    await laneUp(store)
    const ours = async () => (await clientNames()).filter((name) => name.startsWith('svc-test-short-lived'))
    expect((await ours()).sort()).toEqual(['svc-test-short-lived', 'svc-test-short-lived-scripts'])
    store.close()
    await until(async () => (await ours()).length === 0)
    expect(await ours()).toEqual([])
    expect(store.ready).toBe(false)
    expect(store.lane).toBeUndefined()
  })
})

test('a tool whose Redis is down exits once it disconnects: the lane, still reconnecting, goes too', async () => {
  // A port nothing listens on; both clients keep retrying it until told to stop.
  const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  const child = Bun.spawn(
    [
      process.execPath,
      '-e',
      `import { createStore } from ${JSON.stringify(`${import.meta.dir}/../../src/redis/store.ts`)}
       const store = createStore('redis://127.0.0.1:${port}', { name: 'svc-test-down' })
       await Bun.sleep(300)
       store.close()
       console.log('disconnected')`,
    ],
    { stdout: 'pipe', stderr: 'pipe' },
  )
  // A hang guard, not a timing check: before the fix the process lingered about 30 s.
  const guard = setTimeout(() => child.kill(), 10_000)
  const code = await child.exited
  clearTimeout(guard)
  expect(await new Response(child.stdout).text()).toBe('disconnected\n')
  expect(child.signalCode).toBeNull()
  expect(code).toBe(0)
}, 15_000)

const laneClientId = () => clientId('svc-test-market-scripts')

async function clientId(name: string): Promise<number> {
  const list = (await observer.client('LIST')) as string
  const line = list.split('\n').find((l) => l.includes(`name=${name} `))!
  return Number(/id=(\d+)/.exec(line)![1])
}

describe('a store that goes away', () => {
  test("the lane's connection errors count as Redis unreachable, a script's own error does not", async () => {
    const lane = new ScriptLane('redis://127.0.0.1:1', 'svc-test-nowhere')
    const refused = await lane.run('return 1', ['k'], []).catch((error: unknown) => error)
    lane.close()
    expect(isRedisUnavailable(refused)).toBe(true)
    await laneUp(fx.store)
    // Reap without its record retention: the script itself refuses (the default lives in TypeScript).
    const scriptError = await runScript(fx.store, 'reap', [fx.keys.base], {
      limit: 10,
      recordRetentionMs: '',
      tierless: 0,
    }).catch((error: unknown) => error)
    expect(scriptError).toBeInstanceOf(Error)
    expect(isRedisUnavailable(scriptError)).toBe(false)
  })

  test('a buffered settlement that lost the store is a 503 store_unavailable; any other failure the 500 settle_failed', () => {
    const lost = clearFailure(
      Object.assign(new Error('Connection closed'), { code: 'ERR_REDIS_CONNECTION_CLOSED' }),
      'sr_x',
    )
    expect([lost.status, lost.code]).toEqual([503, 'store_unavailable'])
    const failed = clearFailure(new Error('ERR user_script: boom'), 'sr_x')
    expect([failed.status, failed.code]).toEqual([500, 'settle_failed'])
  })
})
