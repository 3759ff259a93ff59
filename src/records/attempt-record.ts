// One ended attempt, as its hash holds it (written by lua/clear.lua, release.lua and lib/reap.lua
// in the script that ended it, or by refusals.ts for a refusal; in either shape, attempt-fields.ts),
// turned into what a request's record shows. Offer ids only: a supplier's identity, URL or key never gets here.
import { attemptFields } from './attempt-fields.ts'
import { parseAttemptId } from './attempt-id.ts'

export type AttemptEnd = 'cleared' | 'released' | 'reaped' | 'refused'
const ENDS: readonly string[] = ['cleared', 'released', 'reaped', 'refused']

/** What the request record keeps of one attempt (integers: micro-USDC, micro-DIEM, ms). */
export interface AttemptRecord {
  n: number
  end: AttemptEnd
  offerId: string | null
  /** completed | incomplete for a cleared attempt */
  outcome: string | null
  errorCode: string | null
  askCents: number | null
  /** what the buyer paid, micro-USDC */
  charged: number
  /** metered (or estimated) capacity burn billed, micro-DIEM: never above the hold */
  burn: number
  /** burn the supplier reported beyond what was billed, micro-DIEM: never paid */
  disputed: number
  inputTokens: number
  outputTokens: number
  estimated: boolean
  /** the upstream's own cost when it disagreed with the burn, micro-DIEM: recorded, never billed */
  upstreamCost: number | null
  admittedAt: number | null
  endedAt: number
  /** The request's last attempt: no other supplier was tried after it (its record is complete). */
  final: boolean
}

export interface EndedAttempt {
  supportReference: string
  accountId: string
  requestId: string
  model: string
  record: AttemptRecord
}

const int = (value: string | undefined) => (value === undefined || value === '' ? 0 : Number(value))
const orNull = (value: string | undefined) => (value === undefined || value === '' ? null : value)

/** Reads one attempt hash, or null when it is not an ended attempt (still in flight, or not one). */
export function endedAttempt(hash: Record<string, string>): EndedAttempt | null {
  const f = attemptFields(hash)
  const id = parseAttemptId(f.id ?? '')
  if (!id || !ENDS.includes(f.state ?? '') || !f.accountId) return null
  const end = f.state as AttemptEnd
  return {
    supportReference: id.supportReference,
    accountId: f.accountId,
    requestId: f.requestId ?? '',
    model: f.model ?? '',
    record: {
      n: id.n,
      end,
      offerId: orNull(f.offerId),
      outcome: end === 'cleared' ? (f.outcome ?? 'completed') : null,
      errorCode: end === 'reaped' ? 'lease_expired' : orNull(f.errorCode),
      askCents: f.askCents ? Number(f.askCents) : null,
      charged: int(f.costUsdc),
      burn: int(f.burn),
      disputed: int(f.disputed),
      inputTokens: int(f.inputTokens),
      outputTokens: int(f.outputTokens),
      estimated: f.estimated === '1',
      upstreamCost: f.upstreamCost ? Number(f.upstreamCost) : null,
      admittedAt: f.admittedAt ? Number(f.admittedAt) : null,
      endedAt: int(f.endedAt),
      // A release says whether the request fell forward; every other end is the request's last.
      final: end !== 'released' || f.final === '1',
    },
  }
}
