// GET /v1/agent/requests/{support_reference}: a request's record, read from its ended attempts
// (`attempt:<support reference>.<n>`, written by the script that ended each), shown to the
// account that made the request only.
import { formatMicros } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { attemptIdOf, MAX_ATTEMPTS } from './attempt-id.ts'
import { type AttemptRecord, type EndedAttempt, endedAttempt } from './attempt-record.ts'
import { SUPPORT_REFERENCE } from './support-reference.ts'

export type RequestStatus = 'completed' | 'incomplete' | 'failed' | 'expired' | 'refused'

const ATTEMPT_OUTCOME: Record<AttemptRecord['end'], (a: AttemptRecord) => string> = {
  cleared: (a) => a.outcome ?? 'completed',
  released: () => 'failed',
  reaped: () => 'expired',
  refused: () => 'refused',
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

function attemptView(a: AttemptRecord) {
  return {
    attempt: a.n,
    offerId: a.offerId,
    outcome: ATTEMPT_OUTCOME[a.end](a),
    errorCode: a.end === 'cleared' ? null : a.errorCode,
    clearingPriceCents: a.askCents,
    costUsdc: formatMicros(a.charged),
    startedAt: iso(a.admittedAt),
    endedAt: iso(a.endedAt),
  }
}

/** Served: its outcome; else expired, failed or refused, by the furthest any attempt got. */
function statusOf(attempts: AttemptRecord[], served: AttemptRecord | undefined): RequestStatus {
  if (served) return ATTEMPT_OUTCOME.cleared(served) as RequestStatus
  if (attempts.some((a) => a.end === 'reaped')) return 'expired'
  if (attempts.some((a) => a.end === 'released')) return 'failed'
  return 'refused'
}

/**
 * Every attempt up to the request's last has ended. False while one is still in flight (a stream
 * still open, or the next supplier being tried).
 */
function isComplete(attempts: AttemptRecord[]): boolean {
  const last = attempts.find((a) => a.final)
  return last !== undefined && attempts.filter((a) => a.n <= last.n).length === last.n
}

function requestView(supportReference: string, first: EndedAttempt, attempts: AttemptRecord[]) {
  const served = attempts.find((a) => a.end === 'cleared')
  const last = attempts.at(-1)!
  return {
    object: 'request' as const,
    supportReference,
    requestId: first.requestId || null,
    model: first.model || null,
    status: statusOf(attempts, served),
    complete: isComplete(attempts),
    errorCode: served ? null : last.errorCode,
    costUsdc: formatMicros(served?.charged ?? 0),
    clearingPriceCents: served?.askCents ?? null,
    burnDiem: formatMicros(served?.burn ?? 0),
    // What the supplier reported beyond what this request could be billed: recorded, never paid.
    disputedBurnDiem: formatMicros(served?.disputed ?? 0),
    // The upstream's own cost when it disagreed with the burn: recorded, never billed.
    upstreamCostDiem: served?.upstreamCost == null ? null : formatMicros(served.upstreamCost),
    usage: served
      ? {
          inputTokens: served.inputTokens,
          outputTokens: served.outputTokens,
          totalTokens: served.inputTokens + served.outputTokens,
          estimated: served.estimated,
        }
      : null,
    createdAt: iso(attempts[0]!.admittedAt ?? attempts[0]!.endedAt),
    endedAt: iso(Math.max(...attempts.map((a) => a.endedAt))),
    attempts: attempts.map(attemptView),
  }
}

export type RequestView = ReturnType<typeof requestView>

/** The request's record when it exists and belongs to the account; null otherwise (a 404 alike). */
export async function lookupRequest(
  store: Store,
  keys: Keyspace,
  accountId: string,
  supportReference: string,
): Promise<RequestView | null> {
  if (!SUPPORT_REFERENCE.test(supportReference)) return null
  const pipeline = store.pipeline()
  // The caller's own: where its account's attempts are, one slot for all of them.
  for (let n = 1; n <= MAX_ATTEMPTS; n++)
    pipeline.hgetall(keys.accountAttempt(accountId, attemptIdOf(supportReference, n)))
  const ended: EndedAttempt[] = []
  for (const [error, row] of (await pipeline.exec()) ?? []) {
    if (error) throw error
    const attempt = endedAttempt(row as Record<string, string>)
    if (attempt) ended.push(attempt)
  }
  // Another account's request is not told apart from one that does not exist.
  if (ended.length === 0 || ended.some((a) => a.accountId !== accountId)) return null
  return requestView(
    supportReference,
    ended[0]!,
    ended.map((a) => a.record),
  )
}
