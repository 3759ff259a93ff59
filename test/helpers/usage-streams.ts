// For the tests of the sums kept beside the activity and fills Streams (src/records/stream-sums.ts):
// entries placed in time by their ids, a store whose clock is fixed and whose reads are counted,
// and the reference the sums must equal: a scan of the whole Stream, as usage and earnings were.
import { formatMicros } from '../../src/money/units.ts'
import { fieldsOf } from '../../src/records/activity.ts'
import { lastDays, utcDay } from '../../src/records/days.ts'
import { STATS_WINDOWS, type StatsWindow } from '../../src/records/stats.ts'
import type { Store } from '../../src/redis/store.ts'

export const HOUR = 3_600_000
export const DAY = 86_400_000
export const MODELS = ['llama-3.3-70b', 'qwen:with:colons', '']
const STATUSES = ['completed', 'incomplete', 'failed', 'refused', 'released']

/** A seeded generator: the same entries on every run. */
export function seeded(seed: number) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** An ended attempt's packed entry (lua/lib/attempts.lua end_attempt's). */
export function endedEntry(random: () => number, accountId: string): string {
  const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)]!
  return [
    `sr_${Math.floor(random() * 1e12)}.1`,
    accountId,
    'key-1',
    pick(STATUSES),
    String(Math.floor(random() * 2_000_000)),
    '40',
    '5',
    '5',
    'off_1',
    '',
    pick(MODELS),
  ].join('\x1f')
}

/** Entry ids at the times given (ms, ascending), several in one ms getting seqs 0, 1, ... */
export function idsAt(times: number[]): string[] {
  const seqs = new Map<number, number>()
  return times.map((ms) => {
    const seq = seqs.get(ms) ?? 0
    seqs.set(ms, seq + 1)
    return `${ms}-${seq}`
  })
}

/** Appends the entries at the ids given, in a few pipelines. */
export async function append(store: Store, stream: string, ids: string[], value: (i: number) => string[]) {
  for (let i = 0; i < ids.length; i += 500) {
    const pipe = store.pipeline()
    for (let j = i; j < Math.min(i + 500, ids.length); j++) pipe.xadd(stream, ids[j]!, ...value(j))
    await pipe.exec()
  }
}

export interface Probe {
  /** Entries the XRANGEs returned. */
  ranged: number
  /** Folds refused: another read had moved the cursor. */
  refused: number
  /** Folds written. */
  folded: number
}

/**
 * The store with Redis's TIME fixed at `nowMs`, its XRANGE entries and folds counted into `probe`,
 * and with `beforeFirstFold` awaited before its first fold (a barrier: reads that fold together).
 */
export function probedStore(
  real: Store,
  nowMs: number,
  probe: Probe,
  beforeFirstFold?: () => Promise<void>,
): Store {
  let first = true
  return new Proxy(real, {
    get(target, name) {
      if (name === 'time')
        return async () => [String(Math.floor(nowMs / 1000)), String((nowMs % 1000) * 1000)]
      if (name === 'xrange')
        return async (...args: unknown[]) => {
          const entries = (await (target.xrange as (...a: unknown[]) => Promise<unknown[]>)(
            ...args,
          )) as unknown[]
          probe.ranged += entries.length
          return entries
        }
      if (name === 'sendScript')
        return async (...args: Parameters<Store['sendScript']>) => {
          if (args[0] === 'foldSums' && first) {
            first = false
            await beforeFirstFold?.()
          }
          const result = await target.sendScript(...args)
          if (args[0] === 'foldSums') Number(result) === 1 ? probe.folded++ : probe.refused++
          return result
        }
      const value = Reflect.get(target, name, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

export const newProbe = (): Probe => ({ ranged: 0, refused: 0, folded: 0 })

/** The window's days and its first counted ms, as the gateway reads them. */
function windowOf(nowMs: number, window: StatsWindow, retentionMs: number) {
  const days = lastDays(nowMs, STATS_WINDOWS[window])
  const from = Math.max(Date.parse(`${days[0]}T00:00:00Z`), nowMs - retentionMs, 0)
  return { days, from }
}

/** GET /v1/agent/usage's answer by a scan of the whole Stream (the computation the sums replace). */
export async function referenceUsage(
  store: Store,
  stream: string,
  window: StatsWindow,
  nowMs: number,
  retentionMs: number,
) {
  const { days, from } = windowOf(nowMs, window, retentionMs)
  const byDay = new Map<string, Map<string, { cost: number; requests: number }>>()
  for (const [id, flat] of (await store.xrange(stream, String(from), '+')) as [string, string[]][]) {
    const f = fieldsOf(flat)
    if (f.status !== 'completed' && f.status !== 'incomplete') continue
    const day = utcDay(Number(id.split('-')[0]))
    const models = byDay.get(day) ?? new Map()
    byDay.set(day, models)
    const row = models.get(f.model || 'unknown') ?? { cost: 0, requests: 0 }
    row.cost += Number(f.costUsdc ?? 0)
    row.requests += 1
    models.set(f.model || 'unknown', row)
  }
  const view = (cost: number, requests: number) => ({ costUsdc: formatMicros(cost), requests })
  const daily = days.map((date) => {
    const models = [...(byDay.get(date) ?? new Map()).entries()].sort(([a], [b]) => a.localeCompare(b))
    const cost = models.reduce((sum, [, r]) => sum + r.cost, 0)
    const requests = models.reduce((sum, [, r]) => sum + r.requests, 0)
    return {
      date,
      ...view(cost, requests),
      models: models.map(([model, r]) => ({ model, ...view(r.cost, r.requests) })),
    }
  })
  const cost = [...byDay].filter(([d]) => days.includes(d)).flatMap(([, m]) => [...m.values()])
  return {
    object: 'usage' as const,
    window,
    from: days[0]!,
    to: days.at(-1)!,
    ...view(
      cost.reduce((s, r) => s + r.cost, 0),
      cost.reduce((s, r) => s + r.requests, 0),
    ),
    days: daily,
  }
}

/** GET /v1/supplier/earnings's answer by a scan of every fills Stream, each fill at its clear's time. */
export async function referenceEarnings(
  store: Store,
  streams: string[],
  window: StatsWindow,
  nowMs: number,
  retentionMs: number,
) {
  const { days, from } = windowOf(nowMs, window, retentionMs)
  const byDay = new Map<string, { earned: number; burn: number; fills: number }>()
  for (const stream of streams) {
    for (const [id, flat] of (await store.xrange(stream, String(from), '+')) as [string, string[]][]) {
      const f = fieldsOf(flat)
      const posted = Number(id.split('-')[0])
      const cleared = f.clearedAt === undefined ? posted : Number(f.clearedAt)
      const day = utcDay(Math.min(cleared, posted))
      const row = byDay.get(day) ?? { earned: 0, burn: 0, fills: 0 }
      row.earned += Number(f.earnedUsdc ?? 0)
      row.burn += Number(f.burnDiem ?? 0)
      row.fills += 1
      byDay.set(day, row)
    }
  }
  const view = (d: { earned: number; burn: number; fills: number }) => ({
    earnedUsdc: formatMicros(d.earned),
    burnDiem: formatMicros(d.burn),
    fills: d.fills,
  })
  const total = { earned: 0, burn: 0, fills: 0 }
  const daily = days.map((date) => {
    const row = byDay.get(date) ?? { earned: 0, burn: 0, fills: 0 }
    total.earned += row.earned
    total.burn += row.burn
    total.fills += row.fills
    return { date, ...view(row) }
  })
  return {
    object: 'earnings' as const,
    window,
    from: days[0]!,
    to: days.at(-1)!,
    ...view(total),
    days: daily,
  }
}
