// GET /v1/agent/activity and GET /v1/agent/usage: the account's ended attempts, read from its
// ended-attempt Stream (`acct:<id>:activity`, appended by the script that ends each attempt, so
// an attempt is on it the moment its response is in).
import { formatMicros } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { parseAttemptId } from './attempt-id.ts'
import { lastDays, utcDay } from './days.ts'
import { endedFields } from './ended-entry.ts'
import { DEFAULT_RECORD_RETENTION_MS } from './refusals.ts'
import { STATS_WINDOWS, type StatsWindow } from './stats.ts'

export const ACTIVITY_MAX_LIMIT = 200
export const ACTIVITY_DEFAULT_LIMIT = 50
/** A cursor is a Stream entry id: `<ms>-<seq>`. */
export const ACTIVITY_CURSOR = /^\d{1,15}-\d{1,19}$/

/**
 * The newest end of a page below `before` (exclusive), or null where no entry can be below it:
 * Redis refuses an exclusive end at `0-0`, however many zeros spell it.
 */
export function pageEnd(before: string | null): string | null {
  if (before === null) return '+'
  return /^0+-0+$/.test(before) ? null : `(${before}`
}

/** A Stream entry as ioredis returns it: its id, then its fields as a flat name, value list. */
export type Entry = [id: string, fields: string[]]

/** A Stream entry's fields by name; an ended attempt's packed entry read as its fields (ended-entry.ts). */
export function fieldsOf(flat: string[]): Record<string, string> {
  if (flat.length === 2 && flat[0] === 'e') return endedFields(flat[1]!)
  const row: Record<string, string> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) row[flat[i]!] = flat[i + 1]!
  return row
}

export const entryMs = (id: string) => Number(id.slice(0, id.indexOf('-')))
const intOrNull = (value: string | undefined) => (value ? Number(value) : null)

function activityItem([id, flat]: Entry) {
  const f = fieldsOf(flat)
  const attempt = f.attempt ?? ''
  return {
    supportReference: parseAttemptId(attempt)?.supportReference ?? attempt,
    model: f.model || null,
    keyId: f.key || null,
    status: f.status ?? '',
    costUsdc: formatMicros(Number(f.costUsdc ?? 0)),
    clearingPriceCents: intOrNull(f.askCents),
    inputTokens: intOrNull(f.inputTokens),
    outputTokens: intOrNull(f.outputTokens),
    createdAt: new Date(entryMs(id)).toISOString(),
  }
}

/**
 * A Stream's entries newest first, `limit` of them from just before the cursor (an entry id,
 * exclusive), each made an item by `item`. Entries are only ever appended at the new end, so a page
 * read while others are written never skips nor repeats one: the next page starts below this one's last.
 */
export async function pageStream<T>(
  store: Store,
  stream: string,
  limit: number,
  before: string | null,
  item: (entry: Entry) => T,
  oldest = '-',
) {
  const end = pageEnd(before)
  if (end === null) return { object: 'list' as const, data: [] as T[], nextCursor: null }
  const entries = (await store.xrevrange(stream, end, oldest, 'COUNT', limit + 1)) as Entry[]
  const page = entries.slice(0, limit)
  return {
    object: 'list' as const,
    data: page.map(item),
    nextCursor: entries.length > limit ? page.at(-1)![0] : null,
  }
}

/**
 * The oldest Stream id still within the record retention (Redis's clock, as the entries' ids).
 * The Streams are trimmed with MINID ~, which drops whole nodes only, and not on every append: an
 * entry past the retention may still be there, and is not shown.
 */
export async function retainedFrom(store: Store, retentionMs: number): Promise<string> {
  const [seconds, micros] = await store.time()
  return String(Math.max(0, Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - retentionMs))
}

/** The account's ended attempts within the record retention, newest first (GET /v1/agent/activity). */
export async function listActivity(
  store: Store,
  keys: Keyspace,
  accountId: string,
  limit: number,
  before: string | null,
  retentionMs: number = DEFAULT_RECORD_RETENTION_MS,
) {
  const oldest = await retainedFrom(store, retentionMs)
  return pageStream(store, keys.accountActivity(accountId), limit, before, activityItem, oldest)
}

const USAGE_PAGE = 1_000

/** A window as read from Redis's clock once: its UTC days, oldest first, and the time read. */
export interface WindowRead {
  days: string[]
  nowMs: number
}

export async function readWindow(store: Store, window: StatsWindow): Promise<WindowRead> {
  const [seconds, micros] = await store.time()
  const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  return { days: lastDays(nowMs, STATS_WINDOWS[window]), nowMs }
}

/**
 * The UTC days of the window ending today (Redis's clock), oldest first, after handing `visit` each
 * entry of the Stream from the first day's start, a page at a time. Streams read together pass the
 * window read once (`read`): a clock passing midnight between reads would shift one's window. With
 * `retentionMs`, from no earlier than the record retention either: a trimmed Stream may still hold
 * older entries, which the listings (listActivity, the fills) do not show.
 */
export async function scanWindow(
  store: Store,
  stream: string,
  window: StatsWindow,
  visit: (day: string, fields: Record<string, string>) => void,
  options: { read?: WindowRead; retentionMs?: number } = {},
): Promise<string[]> {
  const { days, nowMs } = options.read ?? (await readWindow(store, window))
  const dayStart = Date.parse(`${days[0]}T00:00:00Z`)
  const retained = options.retentionMs === undefined ? 0 : nowMs - options.retentionMs
  let start = String(Math.max(dayStart, retained, 0))
  for (;;) {
    const entries = (await store.xrange(stream, start, '+', 'COUNT', USAGE_PAGE)) as Entry[]
    for (const [id, flat] of entries) visit(utcDay(entryMs(id)), fieldsOf(flat))
    if (entries.length < USAGE_PAGE) return days
    start = `(${entries.at(-1)![0]}`
  }
}

/**
 * Per UTC day of the window (today's so far included, as /v1/models/stats), what the account was
 * charged and how many requests it was served, split by model. Refused and failed attempts cost
 * nothing and are not requests served; a request counts once, on the attempt that served it.
 */
export async function accountUsage(
  store: Store,
  keys: Keyspace,
  accountId: string,
  window: StatsWindow,
  retentionMs: number = DEFAULT_RECORD_RETENTION_MS,
) {
  const byDay = new Map<string, Map<string, { cost: number; requests: number }>>()
  const visit = (day: string, f: Record<string, string>) => {
    if (f.status !== 'completed' && f.status !== 'incomplete') return
    const models = byDay.get(day) ?? new Map()
    byDay.set(day, models)
    const model = f.model || 'unknown'
    const row = models.get(model) ?? { cost: 0, requests: 0 }
    row.cost += Number(f.costUsdc ?? 0)
    row.requests += 1
    models.set(model, row)
  }
  // Within the record retention, as activity lists.
  const days = await scanWindow(store, keys.accountActivity(accountId), window, visit, { retentionMs })
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
