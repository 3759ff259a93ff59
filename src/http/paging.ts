// `limit` and `before` of a Stream-backed list (activity, fills): 1..200, default 50, and a cursor
// that is a nextCursor from an earlier page; anything else is a 400 naming it.
import { badRequest } from '../errors.ts'
import { ACTIVITY_CURSOR, ACTIVITY_DEFAULT_LIMIT, ACTIVITY_MAX_LIMIT } from '../records/activity.ts'

/** The page a query asks for, or the 400 that says what is wrong with it. */
export function pageQuery(query: Record<string, string | undefined>): {
  limit: number
  before: string | null
} {
  const limitText = query.limit ?? String(ACTIVITY_DEFAULT_LIMIT)
  const limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : 0
  if (limit < 1 || limit > ACTIVITY_MAX_LIMIT) {
    throw badRequest(`limit must be an integer from 1 to ${ACTIVITY_MAX_LIMIT}`, 'invalid_limit')
  }
  const before = query.before ?? null
  if (before !== null && !ACTIVITY_CURSOR.test(before)) {
    throw badRequest('before must be a nextCursor from an earlier page', 'invalid_cursor')
  }
  return { limit, before }
}
