// The token's own record of an authorization, read by the reconciler (a claim in flight) and the
// confirmations watcher (a credit whose transaction the chain no longer holds): the transaction
// that used it, whether that transaction settled it, and when it can no longer be used.
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
 * The transaction that used the authorization, found by the token's AuthorizationUsed log (payer
 * and nonce) from the head read before settling less the authorization's longest life in blocks
 * of at least a second (a copy may have been mined before the claim, under a verification read
 * from a node that had not seen it yet), with its receipt; null when none is found.
 */
export async function authorizationUse(
  deps: WatchDeps,
  terms: AuthorizationTerms,
  fromBlock: bigint,
): Promise<{ transaction: Hex; receipt: Receipt | null } | null> {
  const lifetime = BigInt(deps.config.maxTimeoutSeconds + CLOCK_SKEW_SECONDS)
  const [payer, nonce] = payerAndNonce(terms)
  const transaction = await deps.chain.authorizationUse(
    payer,
    nonce,
    fromBlock > lifetime ? fromBlock - lifetime : 0n,
  )
  return transaction ? { transaction, receipt: await deps.chain.receipt(transaction) } : null
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
