// Usage stats are kept in UTC-day buckets; a day is named YYYY-MM-DD.
const DAY_MS = 86_400_000

export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10)
}

/**
 * The UTC day of a time in ms as a count of days (0: 1970-01-01), as lib/numbers day_of: a supplier
 * key's upstream balance holds on the day it was learned (its allocation resets at 00:00 UTC).
 */
export function dayOf(ms: number): number {
  return Math.floor(ms / DAY_MS)
}

/** The `count` UTC days ending with the day of `ms`, oldest first. */
export function lastDays(ms: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => utcDay(ms - (count - 1 - i) * DAY_MS))
}
