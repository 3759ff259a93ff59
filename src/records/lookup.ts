// GET /v1/agent/requests/{support_reference}: a request's record, as the worker copied it, shown
// to the account that made the request only.
import type Redis from 'ioredis'
import { SUPPORT_REFERENCE } from '../inference/support-reference.ts'
import { formatMicros } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { AttemptRecord } from './attempt-record.ts'

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
 * Every attempt up to the request's last is here. False for a moment after the response while the
 * worker copies the last of them (the replicas copy in parallel, so attempt 2 may land first).
 */
function isComplete(attempts: AttemptRecord[]): boolean {
  const last = attempts.find((a) => a.final)
  return last !== undefined && attempts.filter((a) => a.n <= last.n).length === last.n
}

function requestView(supportReference: string, row: Record<string, string>, attempts: AttemptRecord[]) {
  const served = attempts.find((a) => a.end === 'cleared')
  const last = attempts.at(-1)!
  return {
    object: 'request' as const,
    supportReference,
    requestId: row.requestId ?? null,
    model: row.model ?? null,
    status: statusOf(attempts, served),
    complete: isComplete(attempts),
    errorCode: served ? null : last.errorCode,
    costUsdc: formatMicros(served?.charged ?? 0),
    clearingPriceCents: served?.askCents ?? null,
    burnDiem: formatMicros(served?.burn ?? 0),
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
  redis: Redis,
  keys: Keyspace,
  accountId: string,
  supportReference: string,
): Promise<RequestView | null> {
  if (!SUPPORT_REFERENCE.test(supportReference)) return null
  const row = await redis.hgetall(keys.request(supportReference))
  if (row.accountId !== accountId) return null
  const attempts = Object.entries(row)
    .filter(([field]) => /^a\d+$/.test(field))
    .map(([, json]) => JSON.parse(json) as AttemptRecord)
    .sort((a, b) => a.n - b.n)
  if (attempts.length === 0) return null
  return requestView(supportReference, row, attempts)
}
