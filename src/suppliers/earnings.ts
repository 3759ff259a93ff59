// GET /v1/supplier/earnings: per UTC day of the window, what the supplier's offers earned (net of
// the fee), how much they burned and how many fills, from its fills Streams like the buyer's usage.
import { formatMicros } from '../money/units.ts'
import { readWindow, scanWindow } from '../records/activity.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import type { StatsWindow } from '../records/stats.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { fillStreams } from './fills.ts'

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

export async function supplierEarnings(
  store: Store,
  keys: Keyspace,
  supplierId: string,
  window: StatsWindow,
  retentionMs: number = DEFAULT_RECORD_RETENTION_MS,
) {
  const byDay = new Map<string, Day>()
  const visit = (day: string, f: Record<string, string>) => {
    const row = byDay.get(day) ?? { earned: 0, burn: 0, fills: 0 }
    row.earned += Number(f.earnedUsdc ?? 0)
    row.burn += Number(f.burnDiem ?? 0)
    row.fills += 1
    byDay.set(day, row)
  }
  const streams = await fillStreams(store, keys, supplierId)
  // Held apart, one Stream per offer: all scanned over one window, read once, so a read that
  // passes midnight neither drops an offer's fills of the first day nor counts ones past the last.
  // Within the record retention, as the fills list.
  const read = await readWindow(store, window)
  await Promise.all(streams.map((stream) => scanWindow(store, stream, window, visit, { read, retentionMs })))
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
