// The audit's checks of a pair held apart (two-phase.ts), by attempt id: its reservation on its
// offer's slot against its attempt on its account's. Pure, so that the audit of every slot
// (audit-apart.ts) and the live audit's reading of one pair again (audit-slots-apart.ts) name a
// fault in the same words; the first tells the second where each pair it named is (`pairOf`).
import type { AuditFinding } from './audit.ts'

/** Where a pair the audit named is: its account and its offer. */
export interface PairAt {
  accountId: string
  offerId: string
}

/** The pair of each attempt finding the audit of every slot made. */
export const pairOf = new WeakMap<AuditFinding, PairAt>()

/** A pair in transit: its account charged, its offer not yet posted. */
export const IN_TRANSIT = 'cleared on its account but its reservation is not posted'

const num = (row: Record<string, string> | undefined, field: string) => Number(row?.[field] ?? 0)

/** What is off with a pending reservation given its attempt: none while that attempt is admitted. */
export function reservedProblem(a: Record<string, string> | undefined): string | undefined {
  if (a?.state === 'cleared') return IN_TRANSIT
  if (a?.state !== 'admitted') return `reserved on its offer, ${a ? a.state : 'never held'} on its account`
  return undefined
}

/**
 * What is off with a reservation (`r`; undefined: none on the attempt's offer) given its attempt
 * (`a`, as attemptFields reads it; undefined: none, or one of another offer).
 */
export function pairProblems(
  r: Record<string, string> | undefined,
  a: Record<string, string> | undefined,
): string[] {
  if (!r) {
    const open = a?.state === 'admitted' || a?.state === 'cleared'
    return open ? [`${a.state} on its account with no reservation on its offer`] : []
  }
  if (r.state === 'reserved') {
    const problem = reservedProblem(a)
    return problem ? [problem] : []
  }
  if (r.state === 'voided' && (a?.state === 'admitted' || a?.state === 'cleared'))
    return [`voided on its offer, ${a.state} on its account`]
  if (r.state !== 'posted') return []
  if (a?.state !== 'cleared') return [`posted on its offer, ${a ? a.state : 'missing'} on its account`]
  const problems: string[] = []
  if (num(a, 'burn') !== num(r, 'burnDiem'))
    problems.push(`posted burn ${r.burnDiem} != cleared burn ${a.burn ?? 0}`)
  // Less what the market covered: cleared again with another charge after a failover (lib/posts).
  if (num(r, 'earnedUsdc') + num(r, 'feeUsdc') - num(r, 'uncovered') !== num(a, 'costUsdc'))
    problems.push(
      `earned ${r.earnedUsdc} + fee ${r.feeUsdc} - uncovered ${r.uncovered ?? 0} != charged ${a.costUsdc ?? 0}`,
    )
  return problems
}
