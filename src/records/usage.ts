// GET /v1/agent/usage (the MCP tool get_usage and the dashboard call it): per UTC day of the
// window, what the account was charged and how many requests it was served, split by model, from
// the sums kept beside its ended-attempt Stream (stream-sums.ts: a read folds only what ended
// since the last one).
import { formatMicros } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { readWindow, windowFrom } from './activity.ts'
import { utcDay } from './days.ts'
import { DEFAULT_RECORD_RETENTION_MS } from './refusals.ts'
import type { StatsWindow } from './stats.ts'
import { type Fold, streamSums } from './stream-sums.ts'

/**
 * Refused and failed attempts cost nothing and are not requests served; a request counts once, on
 * the attempt that served it. `c:<model>` its cost (micro-USDC), `n:<model>` its requests.
 */
export const usageFold: Fold = (f, add) => {
  if (f.status !== 'completed' && f.status !== 'incomplete') return
  const model = f.model || 'unknown'
  // A value that is no integer (no script writes one) counts 0 rather than stop every later fold.
  add(`c:${model}`, Math.trunc(Number(f.costUsdc ?? 0)) || 0)
  add(`n:${model}`, 1)
}

/** Per UTC day of the window (today's so far included, as /v1/models/stats), within the record retention, as activity lists. */
export async function accountUsage(
  store: Store,
  keys: Keyspace,
  accountId: string,
  window: StatsWindow,
  retentionMs: number = DEFAULT_RECORD_RETENTION_MS,
) {
  const read = await readWindow(store, window)
  const sums = await streamSums(
    store,
    keys.accountActivity(accountId),
    keys.accountUsage(accountId),
    usageFold,
    read.nowMs,
    windowFrom(read, retentionMs),
  )
  const byDay = new Map<string, Map<string, { cost: number; requests: number }>>()
  for (const [hour, names] of sums) {
    const models = byDay.get(utcDay(hour)) ?? new Map<string, { cost: number; requests: number }>()
    byDay.set(utcDay(hour), models)
    for (const [name, requests] of names) {
      if (!name.startsWith('n:') || requests <= 0) continue
      const model = name.slice(2)
      const row = models.get(model) ?? { cost: 0, requests: 0 }
      row.cost += names.get(`c:${model}`) ?? 0
      row.requests += requests
      models.set(model, row)
    }
  }
  const days = read.days
  const view = (cost: number, requests: number) => ({ costUsdc: formatMicros(cost), requests })
  let totalCost = 0
  let totalRequests = 0
  const daily = days.map((date) => {
    const models = [...(byDay.get(date) ?? new Map()).entries()].sort(([a], [b]) => a.localeCompare(b))
    const cost = models.reduce((sum, [, r]) => sum + r.cost, 0)
    const requests = models.reduce((sum, [, r]) => sum + r.requests, 0)
    totalCost += cost
    totalRequests += requests
    return {
      date,
      ...view(cost, requests),
      models: models.map(([model, r]) => ({ model, ...view(r.cost, r.requests) })),
    }
  })
  return {
    object: 'usage' as const,
    window,
    from: days[0]!,
    to: days.at(-1)!,
    ...view(totalCost, totalRequests),
    days: daily,
  }
}
