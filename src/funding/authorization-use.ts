// The token's own record of an authorization, read by the reconciler (a claim in flight) and the
// confirmations watcher (a credit whose transaction the chain no longer holds): the transaction
// that used it (or the payer's cancellation of it), whether that transaction settled it, and when
// it can no longer be used.
import type { Address, Hex } from 'viem'
import { type Receipt, settlesAuthorization } from './chain.ts'
import { CLOCK_SKEW_SECONDS } from './payments.ts'
import type { WatchDeps } from './watcher.ts'

/** An authorization record's fields these reads use (keys.authorization), as stored. */
export interface AuthorizationTerms {
  /** <chainId>:<token>:<payer>:<nonce>, lower case */
  id: string
  payer: string
  amount: string
  claimedAt?: string
  /** Unix seconds; absent on a claim made before it was kept. */
  validBefore?: string
}

/** The payer and nonce an authorization id names. */
export function payerAndNonce(terms: AuthorizationTerms): [Address, Hex] {
  const [, , payer, nonce] = terms.id.split(':') as [string, string, Address, Hex]
  return [payer, nonce]
}

/**
 * How far this replica's searches for each authorization's use have reached, by authorization id:
 * the last block searched that lay SVC_CONFIRMATIONS and SEARCH_LAG_BLOCKS below the head then (a
 * reorg up to that depth may still add a use above it, and a node behind may not have had it), so
 * the next search for a claim or payment that stays reads only the blocks after it. In memory per replica, not in the record: it moves no money and only saves
 * log queries, so a search never writes to Redis, and a record let go is never written again; a
 * replica that starts searches each range whole once. The oldest marks go past SEARCH_MARKS,
 * costing one whole search again.
 */
export class SearchMarks {
  private readonly reached = new Map<string, bigint>()

  get(id: string): bigint | undefined {
    return this.reached.get(id)
  }

  /** Records `block` as searched, never moving a mark back (a node behind the last one asked). */
  set(id: string, block: bigint): void {
    const before = this.reached.get(id)
    this.reached.delete(id)
    this.reached.set(id, before !== undefined && before > block ? before : block)
    if (this.reached.size > SEARCH_MARKS) this.reached.delete(this.reached.keys().next().value as string)
  }

  /** Drops the mark of an authorization whose claim or payment left its list. */
  forget(id: string): void {
    this.reached.delete(id)
  }
}

const SEARCH_MARKS = 100_000

/**
 * Blocks a search reads again below the last one's reach, beyond SVC_CONFIRMATIONS: the node that
 * answers the logs may lag the one that gave the head, and a use in blocks it did not have yet must
 * still be found by the next search.
 */
export const SEARCH_LAG_BLOCKS = 64n

/** What ended an authorization: a transaction that used it, with its receipt, or the payer's cancellation. */
export type AuthorizationUse =
  | { canceled: false; transaction: Hex; receipt: Receipt | null }
  | { canceled: true; transaction: Hex; blockNumber: bigint }

/**
 * The transaction that ended the authorization, found by the token's AuthorizationUsed or
 * AuthorizationCanceled log (payer and nonce) from the head read before settling less the
 * authorization's longest life in blocks of at least a second (a copy may have been mined before
 * the claim, under a verification read from a node that had not seen it yet), with a use's
 * receipt; null when none is found. A search again for the same authorization starts past the
 * blocks an earlier one covered (SearchMarks).
 */
export async function authorizationUse(
  deps: WatchDeps,
  terms: AuthorizationTerms,
  fromBlock: bigint,
): Promise<AuthorizationUse | null> {
  const lifetime = BigInt(deps.config.maxTimeoutSeconds + CLOCK_SKEW_SECONDS)
  const [payer, nonce] = payerAndNonce(terms)
  const start = fromBlock > lifetime ? fromBlock - lifetime : 0n
  const reached = deps.searched.get(terms.id)
  const from = reached !== undefined && reached >= start ? reached + 1n : start
  const { end, head } = await deps.chain.authorizationUse(payer, nonce, from)
  if (!end) {
    deps.searched.set(terms.id, head - BigInt(deps.config.confirmations) - SEARCH_LAG_BLOCKS)
    return null
  }
  if (end.canceled) return { canceled: true, transaction: end.transaction, blockNumber: end.blockNumber }
  return { canceled: false, transaction: end.transaction, receipt: await deps.chain.receipt(end.transaction) }
}

/**
 * Whether a cancellation is confirmed, SVC_CONFIRMATIONS deep below `head`: until then a reorg may
 * take it out, and a copy of the authorization may still be mined in its place.
 */
export function cancelConfirmed(deps: WatchDeps, use: { blockNumber: bigint }, head: bigint): boolean {
  return use.blockNumber <= head - BigInt(deps.config.confirmations) + 1n
}

/** Whether a receipt settles the authorization: used by the token, its amount paid to payTo. */
export function settles(deps: WatchDeps, terms: AuthorizationTerms, receipt: Receipt): boolean {
  const [from, nonce] = payerAndNonce(terms)
  const { usdcAddress, payTo } = deps.config
  return settlesAuthorization(receipt, usdcAddress, { from, nonce, value: BigInt(terms.amount) }, payTo)
}

/**
 * When the authorization can no longer be used, unix seconds: its validBefore, or for a claim made
 * before that was kept, the latest validBefore its terms allowed at the claim; null when the
 * record holds neither (a credit with no claim).
 */
export function expiresAt(deps: WatchDeps, terms: AuthorizationTerms): bigint | null {
  if (terms.validBefore) return BigInt(terms.validBefore)
  if (!terms.claimedAt) return null
  return BigInt(
    Math.ceil(Number(terms.claimedAt) / 1000) + deps.config.maxTimeoutSeconds + CLOCK_SKEW_SECONDS,
  )
}
