// The scripts as one Redis function library (src/redis/functions.ts), called by the native capGroup:
// loaded again, once, whenever Redis lost it; named after its code, so another version's library
// on the same Redis is left alone; the EVAL forms ioredis runs (Sentinel, Cluster, a lane that is
// down) answer and write exactly as the functions do; and a Redis without functions still works.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomUUID } from 'node:crypto'
import { release } from '../../src/market/clearing.ts'
import { reapExpired } from '../../src/market/leases.ts'
import { functionLibrary, functionName } from '../../src/redis/functions.ts'
import { type LocalRedis, startLocalRedis } from '../../src/redis/local-server.ts'
import { LIBRARY, SCRIPTS } from '../../src/redis/script-registry.ts'
import { runScript } from '../../src/redis/scripts.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore } from '../../src/redis/store.ts'
import { attemptRecord } from '../helpers/attempts.ts'
import {
  admitFor,
  admitted,
  clearFor,
  type MarketFixture,
  marketFixture,
  postOffer,
  seedAccount,
} from '../helpers/market.ts'
import { ownRedis, testRedisUrl } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

// It flushes the server's functions and counts its loads: a server of its own.
await ownRedis()

let observer: Store
const fixtures: MarketFixture[] = []

beforeAll(() => {
  observer = createStore(testRedisUrl(), { name: 'svc-test-functions-observer' })
})
afterAll(() => {
  for (const fx of fixtures) fx.close()
  observer.close()
})

async function withLane(): Promise<MarketFixture> {
  const fx = marketFixture()
  fixtures.push(fx)
  await fx.store.whenReady(5_000)
  await until(() => fx.store.lane !== undefined)
  expect(fx.store.lane).toBeDefined()
  return fx
}

async function libraries(): Promise<string[]> {
  const list = (await observer.call('FUNCTION', 'LIST')) as unknown[][]
  return list.map((entry) => String(entry[1]))
}

/** Calls and usec of one command in INFO commandstats (`function|load`, `fcall`, ...). */
async function commandCalls(store: Store, name: string): Promise<number> {
  const info = (await store.info('commandstats')) as string
  const escaped = name.replace('|', '\\|')
  const match = new RegExp(`cmdstat_${escaped}:calls=(\\d+)`).exec(info)
  return match ? Number(match[1]) : 0
}

describe('the function library', () => {
  test('FUNCTION FLUSH mid-run: the calls that miss it load it once, then all run', async () => {
    const fx = await withLane()
    const accountId = await seedAccount(fx, 1_000_000)
    await postOffer(fx, 40, 5_000_000)
    admitted(await admitFor(fx, accountId))
    expect(await libraries()).toContain(LIBRARY.name)

    await observer.call('FUNCTION', 'FLUSH')
    const loadsBefore = await commandCalls(observer, 'function|load')
    const fcallsBefore = await commandCalls(observer, 'fcall')
    const results = await Promise.all(
      Array.from({ length: 20 }, () => admitFor(fx, accountId, { attemptId: randomUUID() })),
    )
    for (const r of results) admitted(r)
    expect(await libraries()).toContain(LIBRARY.name)
    expect((await commandCalls(observer, 'function|load')) - loadsBefore).toBe(1)
    // They went as functions: every admit an FCALL (the 20 that missed, then the 20 sent again).
    expect((await commandCalls(observer, 'fcall')) - fcallsBefore).toBeGreaterThanOrEqual(20)
  })

  test("a library is named after its code: another version's library is a different one, left alone", async () => {
    const fx = await withLane()
    const other = functionLibrary(
      {
        ...SCRIPTS,
        renew: { ...SCRIPTS.renew, body: `${SCRIPTS.renew.body}\n-- v2` },
      },
      { guarded: false },
    )
    expect(other.name).not.toBe(LIBRARY.name)
    expect(functionName(other, 'admit')).not.toBe(functionName(LIBRARY, 'admit'))
    expect(functionLibrary(SCRIPTS, { guarded: false })).toEqual(LIBRARY)

    await observer.call('FUNCTION', 'LOAD', other.code)
    try {
      await observer.call('FUNCTION', 'DELETE', LIBRARY.name).catch(() => {})
      expect(await runScript(fx.store, 'capacity', [fx.keys.base], { maxPriceCents: 80 })).toBeArray()
      expect(await libraries()).toEqual(expect.arrayContaining([LIBRARY.name, other.name]))
      // The other version's functions still answer, from its own library.
      expect(await observer.call('FCALL', functionName(other, 'capacity'), 1, fx.keys.base, 80)).toBeArray()
    } finally {
      await observer.call('FUNCTION', 'DELETE', other.name)
    }
  })
})

// One mixed workload run twice, on fresh keyspaces: through the functions, and through the EVAL
// forms ioredis runs. Every reply and every hash written must be the same, ids and times aside.
describe('functions and EVAL forms agree', () => {
  async function workload(fx: MarketFixture) {
    const cheap = await postOffer(fx, 40, 5_000_000, { maxInFlight: 3 })
    const dear = await postOffer(fx, 45, 5_000_000)
    const accountId = await seedAccount(fx, 20_000_000)
    const replies: unknown[] = []
    const attempts: string[] = []
    const go = async (label: string, reply: Promise<unknown>) => replies.push([label, await reply])
    const admit = async (over: Parameters<typeof admitFor>[2] = {}) => {
      const attemptId = randomUUID()
      attempts.push(attemptId)
      await go('admit', admitFor(fx, accountId, { attemptId, ...over }))
      return attemptId
    }
    const HOUR = 3_600_000
    const a1 = await admit({ recordRetentionMs: HOUR })
    await go(
      'clear fee',
      clearFor(fx, a1, 700, {
        feeBps: 250,
        upstreamBalanceAfter: 4_000_000 as never,
        recordRetentionMs: HOUR,
      }),
    )
    // No retention given: the default, whatever the call before set.
    const a2 = await admit()
    await go('clear', clearFor(fx, a2, 1_000, { estimated: true, outcome: 'incomplete' }))
    await go('replay', clearFor(fx, a1, 700))
    const a3 = await admit({ capGroup: { name: 'img', cap: 1 } })
    await go('lane cap', admitFor(fx, accountId, { capGroup: { name: 'img', cap: 1 } }))
    await go(
      'release',
      release(fx.store, fx.keys, {
        attemptId: a3,
        errorCode: 'upstream_503',
        cooldownMs: 0,
        upstreamBalance: null,
        final: true,
      }),
    )
    const a4 = await admit({ tried: [cheap] })
    await go('over the hold', clearFor(fx, a4, 50_000_000))
    await go('replay written off', clearFor(fx, a4, 50_000_000))
    const a5 = await admit({ leaseMs: 1 })
    await Bun.sleep(5)
    await go('reap', reapExpired(fx.store, fx.keys, 10))
    await go('late clear', clearFor(fx, a5, 300))
    await go('refused', admitFor(fx, 'acct_nobody'))
    await go('capacity', runScript(fx.store, 'capacity', [fx.keys.base], { maxPriceCents: 80 }))
    await go(
      'quote',
      runScript(fx.store, 'quote', [fx.keys.base], { accountId, holdDiem: 1_000, defaultMaxPriceCents: 50 }),
    )

    const stored: Record<string, unknown> = {
      account: await fx.store.hgetall(fx.keys.account(accountId)),
      cheap: await fx.store.hgetall(fx.keys.offer(cheap)),
      dear: await fx.store.hgetall(fx.keys.offer(dear)),
      leases: await fx.store.zcard(fx.keys.leases),
    }
    for (const [i, id] of attempts.entries()) {
      stored[`attempt ${i}`] = await attemptRecord(fx.store, fx.keys.attempt(id))
      // Hours left of its record: one hour, or the default 30 days.
      stored[`ttl ${i}`] = Math.round((await fx.store.pttl(fx.keys.attempt(id))) / HOUR)
    }
    // Ids and times differ between the runs; everything else must not.
    const ids = [accountId, cheap, dear, ...attempts]
    let text = JSON.stringify({ replies, stored })
    for (const [i, id] of ids.entries()) text = text.replaceAll(id, `<id${i}>`)
    return JSON.parse(text, (key, value) =>
      /At$|^leaseDeadline$|^seq$|^upstreamKeyEnc$|^requestId$|^model$|^wallet$/.test(key) ? undefined : value,
    )
  }

  test('a mixed workload: the same replies and the same stored data', async () => {
    const viaFunctions = await withLane()
    const viaEval = await withLane()
    viaEval.store.lane!.close()
    expect(viaEval.store.lane).toBeUndefined()

    const evalsBefore = await commandCalls(observer, 'evalsha')
    const a = await workload(viaFunctions)
    const evalsBetween = await commandCalls(observer, 'evalsha')
    const b = await workload(viaEval)
    expect((await commandCalls(observer, 'evalsha')) - evalsBetween).toBeGreaterThan(10)
    expect(evalsBetween - evalsBefore).toBeLessThan(10)
    expect(a).toEqual(b)
    expect(a.stored['ttl 0']).toBe(1)
    expect(a.stored['ttl 1']).toBe(30 * 24)
  })
})

describe('a Redis without functions (before 7.0)', () => {
  let old: LocalRedis
  beforeAll(async () => {
    old = await startLocalRedis([
      '--rename-command',
      'FCALL',
      'FCALL_OFF',
      '--rename-command',
      'FUNCTION',
      'FUNCTION_OFF',
    ])
  })
  afterAll(() => old.stop())

  test('the lane runs the EVAL forms instead', async () => {
    const store = createStore(old.url, { name: 'svc-test-no-functions' })
    try {
      await store.whenReady(5_000)
      await until(() => store.lane !== undefined)
      expect(store.lane).toBeDefined()
      for (let i = 0; i < 3; i++)
        expect(await runScript(store, 'capacity', ['p:'], { maxPriceCents: 80 })).toEqual([])
      expect(await commandCalls(store, 'evalsha')).toBeGreaterThanOrEqual(2)
    } finally {
      store.close()
    }
  })
})
