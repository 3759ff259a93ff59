// A key budget's period (its limitReset): a periodic limit binds what the key spends from 00:00 UTC
// of the day, of the week's Monday (ISO weeks), or of the month's 1st, until the next such start.
// The scripts compute the same in lua/lib/numbers.lua (period_start, period_end); a test checks
// that the two agree.
export const LIMIT_RESETS = ['daily', 'weekly', 'monthly'] as const
export type LimitReset = (typeof LIMIT_RESETS)[number]

const DAY_MS = 86_400_000

/** When the period of `kind` around `ms` started (ms). */
export function periodStart(kind: LimitReset, ms: number): number {
  const day = Math.floor(ms / DAY_MS)
  if (kind === 'daily') return day * DAY_MS
  if (kind === 'weekly') return (day - ((new Date(day * DAY_MS).getUTCDay() + 6) % 7)) * DAY_MS
  const date = new Date(day * DAY_MS)
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1)
}

/** When the period of `kind` that started at `start` ends: the next one's start (ms). */
export function periodEnd(kind: LimitReset, start: number): number {
  if (kind === 'daily') return start + DAY_MS
  if (kind === 'weekly') return start + 7 * DAY_MS
  const date = new Date(start)
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1)
}

/**
 * A periodic budget as it stands at `now`: what the key spent in its current period and when that
 * ends. The account hash keeps the spent of the period it last counted in (pstart:/pspent:<keyId>,
 * rolled forward lazily by admit): once that period ended, the current one has spent nothing yet;
 * a clock behind it still reads that period, as admit counts in it (a period never rolls back).
 */
export function currentPeriod(
  kind: LimitReset,
  countedFrom: string | null | undefined,
  counted: string | null | undefined,
  now: number,
): { periodSpent: number; resetsAt: number } {
  const start = Math.max(periodStart(kind, now), Number(countedFrom ?? 0))
  return {
    periodSpent: countedFrom === String(start) ? Number(counted ?? 0) : 0,
    resetsAt: periodEnd(kind, start),
  }
}

export const isLimitReset = (value: unknown): value is LimitReset =>
  (LIMIT_RESETS as readonly unknown[]).includes(value)
