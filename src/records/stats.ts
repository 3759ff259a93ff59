// GET /v1/models/stats: each model's share of the requests served in a window, from the daily
// buckets lua/clear.lua counts in (HINCRBY per day per model as each request clears). Shares only, never a
// count; below the privacy threshold nothing but hasSufficientVolume: false.
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { lastDays } from './days.ts'

/** A window is this many UTC days, today's (so far) included. */
export const STATS_WINDOWS = { '24h': 1, '7d': 7, '30d': 30 } as const
export type StatsWindow = keyof typeof STATS_WINDOWS

/** Shares are given to 4 decimals, in parts of this. */
const SHARE_PARTS = 10_000

/** Splits SHARE_PARTS in proportion to counts (largest remainder), so the parts sum exactly. */
export function apportion(counts: number[]): number[] {
  const total = counts.reduce((a, b) => a + b, 0)
  if (total === 0) return counts.map(() => 0)
  const exact = counts.map((c) => (c * SHARE_PARTS) / total)
  const parts = exact.map(Math.floor)
  let left = SHARE_PARTS - parts.reduce((a, b) => a + b, 0)
  const byRemainder = exact
    .map((e, i) => [e - Math.floor(e), i] as const)
    .sort((a, b) => b[0] - a[0] || a[1] - b[1])
  for (const [, i] of byRemainder) {
    if (left-- <= 0) break
    parts[i]!++
  }
  return parts
}

const share = (parts: number) => parts / SHARE_PARTS

/** Each day's counts by model, one bucket a day on the market's slot. */
async function marketBuckets(store: Store, keys: Keyspace, days: string[]) {
  const pipeline = store.pipeline()
  for (const day of days) pipeline.hgetall(keys.statsDay(day))
  return ((await pipeline.exec()) ?? []).map(([error, row]) => {
    if (error) throw error
    return row as Record<string, string>
  })
}

/**
 * Held apart, each offer counts what it served on its own slot: a day's bucket sums them, with the
 * market's own (a market migrated from one slot keeps there what it counted before).
 */
async function offerBuckets(store: Store, keys: Keyspace, days: string[]) {
  const offers = await store.smembers(keys.offers)
  const market = await marketBuckets(store, keys, days)
  return Promise.all(
    days.map(async (day, d) => {
      const rows = await Promise.all(offers.map((offerId) => store.hgetall(keys.offerStatsDay(offerId, day))))
      const bucket: Record<string, string> = { ...market[d] }
      for (const row of rows)
        for (const [model, count] of Object.entries(row))
          bucket[model] = String(Number(bucket[model] ?? 0) + Number(count))
      return bucket
    }),
  )
}

export async function modelStats(store: Store, keys: Keyspace, window: StatsWindow, minRequests: number) {
  const [seconds] = await store.time()
  const days = lastDays(Number(seconds) * 1000, STATS_WINDOWS[window])
  const buckets =
    keys.layout === 'apart' ? await offerBuckets(store, keys, days) : await marketBuckets(store, keys, days)

  const totals = new Map<string, number>()
  for (const bucket of buckets)
    for (const [model, count] of Object.entries(bucket))
      totals.set(model, (totals.get(model) ?? 0) + Number(count))
  const total = [...totals.values()].reduce((a, b) => a + b, 0)
  const base = { object: 'model_stats' as const, window, from: days[0]!, to: days.at(-1)! }
  if (total < minRequests) return { ...base, hasSufficientVolume: false, models: [] }

  // Most used first; ties in model id order, so ranks are stable.
  const models = [...totals.keys()].sort((a, b) => totals.get(b)! - totals.get(a)! || a.localeCompare(b))
  const usage = apportion(models.map((m) => totals.get(m)!))
  const daily = buckets.map((bucket) => apportion(models.map((m) => Number(bucket[m] ?? 0))))
  return {
    ...base,
    hasSufficientVolume: true,
    models: models.map((id, i) => ({
      id,
      rank: i + 1,
      usageShare: share(usage[i]!),
      daily: days.map((date, d) => ({ date, share: share(daily[d]![i]!) })),
    })),
  }
}

export type ModelStats = Awaited<ReturnType<typeof modelStats>>

/** How long an answer of modelStats is served again (the route's max-age says the same). */
export const STATS_CACHE_SECONDS = 60

/** A window's answer being computed in this process: callers meanwhile share it. */
const computing = new Map<string, Promise<ModelStats>>()

/**
 * modelStats, from the replicas' shared cache when fresh. The route is public and, held apart, an
 * answer reads every offer's bucket for every day of the window: computed once a minute, not once
 * a request.
 */
export async function cachedModelStats(
  store: Store,
  keys: Keyspace,
  window: StatsWindow,
  minRequests: number,
): Promise<ModelStats> {
  const cacheKey = keys.statsSnapshot(window)
  const cached = await store.get(cacheKey)
  if (cached) return JSON.parse(cached) as ModelStats
  let answer = computing.get(cacheKey)
  if (!answer) {
    answer = (async () => {
      const stats = await modelStats(store, keys, window, minRequests)
      // First writer wins, so replicas that computed at the same moment all answer one figure.
      const stored = await store.set(cacheKey, JSON.stringify(stats), 'EX', STATS_CACHE_SECONDS, 'NX')
      if (stored === 'OK') return stats
      const first = await store.get(cacheKey)
      return first ? (JSON.parse(first) as ModelStats) : stats
    })().finally(() => computing.delete(cacheKey))
    computing.set(cacheKey, answer)
  }
  return answer
}
