// An attempt's id: its request's support reference and its number among the request's attempts,
// one per offer tried. A request's attempts are found from its reference alone, with no index.

/** Offers tried for one request at most: its attempts are numbered 1 to this. */
export const MAX_ATTEMPTS = 5

export function attemptIdOf(supportReference: string, n: number): string {
  return `${supportReference}.${n}`
}

const ATTEMPT_ID = /^(sr_[a-z2-7]{20})\.([1-9])$/

/** The reference and number of an attempt id, or null when it is not one. */
export function parseAttemptId(id: string): { supportReference: string; n: number } | null {
  const match = ATTEMPT_ID.exec(id)
  return match ? { supportReference: match[1]!, n: Number(match[2]) } : null
}
