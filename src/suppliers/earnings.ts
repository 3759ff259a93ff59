// GET /v1/supplier/earnings: per UTC day of the window, what the supplier's offers earned (net of
// the fee), how much they burned and how many fills, from the sums kept beside its fills Streams
// (records/stream-sums.ts), like the buyer's usage.
import { formatMicros } from '../money/units.ts'
import { readWindow, windowFrom } from '../records/activity.ts'
import { utcDay } from '../records/days.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import type { StatsWindow } from '../records/stats.ts'
import { type Fold, streamSums } from '../records/stream-sums.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { clearedAt, fillStreams } from './fills.ts'

interface Day {
  earned: number
  burn: number
  fills: number
}

const view = (d: Day) => ({
  earnedUsdc: formatMicros(d.earned),
  burnDiem: formatMicros(d.burn),
  fills: d.fills,
})

/**
 * `e` earned (micro-USDC), `b` burned (micro-DIEM), `f` fills; a value that is no integer counts 0.
 * A fill posted in a later hour than its clear (held apart) counts at the clear's time.
 */
export const fillsFold: Fold = Object.assign(
  (f: Record<string, string>, add: (name: string, amount: number) => void) => {
    add('e', Math.trunc(Number(f.earnedUsdc ?? 0)) || 0)
    add('b', Math.trunc(Number(f.burnDiem ?? 0)) || 0)
    add('f', 1)
  },
  { at: clearedAt },
)

export async function supplierEarnings(
  store: Store,
  keys: Keyspace,
  supplierId: string,
  window: StatsWindow,
  retentionMs: number = DEFAULT_RECORD_RETENTION_MS,
) {
  const byDay = new Map<string, Day>()
  const streams = await fillStreams(store, keys, supplierId)
  // Held apart, one Stream per offer: all summed over one window, read once, so a read that
  // passes midnight neither drops an offer's fills of the first day nor counts ones past the last.
  // Within the record retention, as the fills list.
  const read = await readWindow(store, window)
  const from = windowFrom(read, retentionMs)
  const sums = await Promise.all(
    streams.map((stream) => streamSums(store, stream, keys.fillsSums(stream), fillsFold, read.nowMs, from)),
  )
  for (const [hour, names] of sums.flatMap((s) => [...s])) {
    const day = utcDay(hour)
    const row = byDay.get(day) ?? { earned: 0, burn: 0, fills: 0 }
    row.earned += names.get('e') ?? 0
    row.burn += names.get('b') ?? 0
    row.fills += names.get('f') ?? 0
    byDay.set(day, row)
  }
  const days = read.days
  const total: Day = { earned: 0, burn: 0, fills: 0 }
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
