// `limit` and `before` of a list (activity, fills, payouts): 1..200, default 50, and a cursor that
// is a nextCursor from an earlier page (a Stream entry id unless told); the `window` of a summary
// by day (24h, 7d or 30d); anything else is a 400.
import { badRequest } from '../errors.ts'
import { ACTIVITY_CURSOR, ACTIVITY_DEFAULT_LIMIT, ACTIVITY_MAX_LIMIT } from '../records/activity.ts'
import { STATS_WINDOWS, type StatsWindow } from '../records/stats.ts'

const WINDOWS = Object.keys(STATS_WINDOWS)

/** The window a query asks for (7d when none), or the 400 that names the ones there are. */
export function windowQuery(query: Record<string, string | undefined>): StatsWindow {
  const window = query.window ?? '7d'
  if (!WINDOWS.includes(window)) {
    throw badRequest(
      `window must be one of ${WINDOWS.join(', ')}; got '${window.slice(0, 20)}'`,
      'invalid_window',
    )
  }
  return window as StatsWindow
}

/** The page a query asks for, or the 400 that says what is wrong with it. */
export function pageQuery(
  query: Record<string, string | undefined>,
  cursor: RegExp = ACTIVITY_CURSOR,
): {
  limit: number
  before: string | null
} {
  const limitText = query.limit ?? String(ACTIVITY_DEFAULT_LIMIT)
  const limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : 0
  if (limit < 1 || limit > ACTIVITY_MAX_LIMIT) {
    throw badRequest(`limit must be an integer from 1 to ${ACTIVITY_MAX_LIMIT}`, 'invalid_limit')
  }
  const before = query.before ?? null
  if (before !== null && !cursor.test(before)) {
    throw badRequest('before must be a nextCursor from an earlier page', 'invalid_cursor')
  }
  return { limit, before }
}
