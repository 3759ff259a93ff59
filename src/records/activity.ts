// GET /v1/agent/activity (and, for usage.ts, the window read): the account's ended attempts, read from its
// ended-attempt Stream (`acct:<id>:activity`, appended by the script that ends each attempt, so
// an attempt is on it the moment its response is in).
import { formatMicros } from '../money/units.ts'
import { redisNow } from '../redis/clock.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { parseAttemptId } from './attempt-id.ts'
import { lastDays } from './days.ts'
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
  return String(Math.max(0, (await redisNow(store)) - retentionMs))
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

/** A window as read from Redis's clock once: its UTC days, oldest first, and the time read. */
export interface WindowRead {
  days: string[]
  nowMs: number
}

export async function readWindow(store: Store, window: StatsWindow): Promise<WindowRead> {
  const nowMs = await redisNow(store)
  return { days: lastDays(nowMs, STATS_WINDOWS[window]), nowMs }
}

/**
 * Where a window's sums start: its first day's start, and with `retentionMs`, no earlier than the
 * record retention either (a trimmed Stream may still hold older entries, which the listings,
 * listActivity and the fills, do not show).
 */
export function windowFrom(read: WindowRead, retentionMs: number): number {
  return Math.max(Date.parse(`${read.days[0]}T00:00:00Z`), read.nowMs - retentionMs, 0)
}
