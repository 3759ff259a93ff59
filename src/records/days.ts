// Usage stats are kept in UTC-day buckets; a day is named YYYY-MM-DD.
const DAY_MS = 86_400_000

export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10)
}

/** The `count` UTC days ending with the day of `ms`, oldest first. */
export function lastDays(ms: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => utcDay(ms - (count - 1 - i) * DAY_MS))
}
