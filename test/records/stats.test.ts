// GET /v1/models/stats end to end: requests served through a real gateway count in today's bucket
// as they clear; older days are set in their buckets to test the windows. Shares, a
// rank, never a count; nothing below the privacy threshold.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { lastDays } from '../../src/records/days.ts'
import type { ModelStats } from '../../src/records/stats.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 3 }, env: { SVC_STATS_MIN_REQUESTS: '5' } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack)
})
afterAll(() => stack.stop())

/** An answer computed afresh: the shared cache forgotten first (it is tested on its own below). */
async function stats(
  query = '',
): Promise<{ status: number; body: ModelStats & { error?: { code: string } } }> {
  await stack.store.del(...(['24h', '7d', '30d'] as const).map((w) => stack.keys.statsSnapshot(w)))
  const response = await fetch(`${stack.url}/v1/models/stats${query}`)
  return { status: response.status, body: (await response.json()) as never }
}

async function serve(model: string, times: number) {
  for (let i = 0; i < times; i++) {
    const response = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(response.status).toBe(200)
  }
}

/** Today's bucket counts `count` served requests the moment their responses are in (clear counts them). */
async function counted(count: number) {
  const [seconds] = await stack.store.time()
  const today = stack.keys.statsDay(lastDays(Number(seconds) * 1000, 1)[0]!)
  const counts = Object.values(await stack.store.hgetall(today)).map(Number)
  expect(counts.reduce((a, b) => a + b, 0)).toBe(count)
}

const shareSum = (values: number[]) => Math.round(values.reduce((a, b) => a + b, 0) * 10_000)

describe('GET /v1/models/stats', () => {
  test('below the privacy threshold: hasSufficientVolume false and no models', async () => {
    await serve('llama-3.3-70b', 4)
    await counted(4)
    const { status, body } = await stats()
    expect(status).toBe(200)
    expect(body).toMatchObject({
      object: 'model_stats',
      window: '7d',
      hasSufficientVolume: false,
      models: [],
    })
  })

  test('at the threshold: a rank and shares per model, summing to 1, and no count anywhere', async () => {
    await serve('qwen3-4b', 1)
    await counted(5)
    const { body } = await stats('?window=24h')
    expect(body.hasSufficientVolume).toBe(true)
    expect(body.models).toEqual([
      { id: 'llama-3.3-70b', rank: 1, usageShare: 0.8, daily: [{ date: body.to, share: 0.8 }] },
      { id: 'qwen3-4b', rank: 2, usageShare: 0.2, daily: [{ date: body.to, share: 0.2 }] },
    ])
    expect(body.from).toBe(body.to)
  })

  test('the windows: 24h is today, 7d and 30d reach back into older days; shares always sum to 1', async () => {
    const [seconds] = await stack.store.time()
    const days = lastDays(Number(seconds) * 1000, 30)
    await stack.store.hincrby(stack.keys.statsDay(days[29 - 3]!), 'qwen3-4b', 15) // 3 days ago
    await stack.store.hincrby(stack.keys.statsDay(days[29 - 20]!), 'llama-3.3-70b', 80) // 20 days ago

    const day = (await stats('?window=24h')).body
    expect(day.models.map((m) => [m.id, m.usageShare])).toEqual([
      ['llama-3.3-70b', 0.8],
      ['qwen3-4b', 0.2],
    ])

    const week = (await stats()).body // 7d is the default
    expect(week.window).toBe('7d')
    expect(week.from).toBe(days[23]!)
    expect(week.to).toBe(days[29]!)
    // 16 of 20 are qwen now: it ranks first
    expect(week.models.map((m) => [m.id, m.rank, m.usageShare])).toEqual([
      ['qwen3-4b', 1, 0.8],
      ['llama-3.3-70b', 2, 0.2],
    ])
    for (const m of week.models) expect(m.daily.map((d) => d.date)).toEqual(days.slice(23))
    const qwen = week.models[0]!.daily
    expect(qwen.find((d) => d.date === days[26])!.share).toBe(1) // the only model that day
    expect(qwen.find((d) => d.date === days[25])!.share).toBe(0) // nothing served that day

    const month = (await stats('?window=30d')).body
    expect(month.models.map((m) => [m.id, m.usageShare])).toEqual([
      ['llama-3.3-70b', 0.84],
      ['qwen3-4b', 0.16],
    ])
    for (const body of [day, week, month]) {
      expect(shareSum(body.models.map((m) => m.usageShare))).toBe(10_000)
      for (const [i, { date }] of body.models[0]!.daily.entries()) {
        const total = shareSum(body.models.map((m) => m.daily[i]!.share))
        expect([0, 10_000]).toContain(total)
        expect(body.models[1]!.daily[i]!.date).toBe(date)
      }
      for (const m of body.models)
        expect(Object.keys(m).sort()).toEqual(['daily', 'id', 'rank', 'usageShare'])
    }
  })

  test('shares that do not divide evenly still sum to exactly 1', async () => {
    const [seconds] = await stack.store.time()
    const [today] = lastDays(Number(seconds) * 1000, 1)
    await stack.store.hincrby(stack.keys.statsDay(today!), 'qwen3-4b', 2) // 4 and 3 today
    const { body } = await stats('?window=24h')
    expect(body.models.map((m) => m.usageShare)).toEqual([0.5714, 0.4286])
    expect(shareSum(body.models.map((m) => m.usageShare))).toBe(10_000)
  })

  test('any other window is a 400 in the error shape, and changes nothing', async () => {
    const before = await snapshotKeys(stack.store, stack.keys.prefix)
    for (const bad of ['1h', '7D', '', '30d ', '24h&window=7d']) {
      const response = await fetch(`${stack.url}/v1/models/stats?window=${encodeURIComponent(bad)}`)
      expect(response.status).toBe(400)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_window')
    }
    expect(await snapshotKeys(stack.store, stack.keys.prefix)).toEqual(before)
  })

  test('an answer is shared a minute: callers after more requests get it as it was', async () => {
    await serve('llama-3.3-70b', 5)
    const first = (await stats('?window=30d')).body
    expect(first.hasSufficientVolume).toBe(true)
    // Many at once, after more requests: the cached answer, not a figure with them.
    await serve('qwen3-4b', 5)
    const many = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const response = await fetch(`${stack.url}/v1/models/stats?window=30d`)
        expect(response.headers.get('cache-control')).toBe('public, max-age=60')
        return response.json()
      }),
    )
    for (const body of many) expect(body).toEqual(first)
    expect(await stack.store.ttl(stack.keys.statsSnapshot('30d'))).toBeGreaterThan(0)
    // Forgotten, it counts them.
    expect((await stats('?window=30d')).body).not.toEqual(first)
  })

  test('/v1/models/stats wins over the single-model route, which still answers', async () => {
    expect((await stats()).body.object).toBe('model_stats')
    const model = await fetch(`${stack.url}/v1/models/llama-3.3-70b`)
    expect(((await model.json()) as { id: string }).id).toBe('llama-3.3-70b')
    expect((await fetch(`${stack.url}/v1/models/svc%2Fqwen3-4b`)).status).toBe(200)
  })
})
