// A pending payment whose transaction the chain no longer holds (a reorg took it out, or mined it
// again where it reverted), still missing SVC_CONFIRMATIONS blocks past the depth that would have
// confirmed it: the token's record of its authorization says where the money went. Used by another
// transaction (anyone holding the signed authorization may send it: the payer's own relayer,
// another facilitator): the payment moves to that transaction and confirms from its block. Unused
// as of a confirmed block whose time is past its validBefore: no transaction can use it any more,
// no money moved, and the credit is taken back; so it is once the payer's cancellation of it is
// confirmed (the token reads a cancellation as "used", but no transfer can use it). Else it waits (a transaction that may yet be mined,
// or a use no search finds: logged for the operator).
import { authorizationUse, cancelConfirmed, expiresAt, payerAndNonce, settles } from './authorization-use.ts'
import { paymentId, transactionOf } from './ledger.ts'
import { CHAIN_IDS } from './network.ts'
import { onFundingChain } from './on-chain.ts'
import type { ConfirmedUpTo, WatchDeps } from './watcher.ts'

/**
 * The last recorded block of a payment whose missing transaction is searched for: SVC_CONFIRMATIONS
 * below the last confirmed block. In blocks, the chain's own clock and the unit of its depth: a
 * transaction a reorg took out is mostly mined again from the mempool within a few blocks, so the
 * search (a log query over the authorization's life) runs only for one still missing after them,
 * and a node that stalls advances no block, so none runs on its word alone.
 */
export function searchUpTo(deps: WatchDeps, chain: ConfirmedUpTo): bigint {
  return chain.lastEligible - BigInt(deps.config.confirmations)
}

/** Moves or takes back a payment whose transaction is missing: `done` when it left the list. */
export async function followAuthorization(
  deps: WatchDeps,
  id: string,
  payment: Record<string, string>,
  chain: ConfirmedUpTo,
): Promise<'done' | 'kept'> {
  const { config, ledger, logger } = deps
  const auth = await ledger.authorization(payment.authorization ?? '')
  if (auth?.state !== 'credited' || auth.paymentId !== id) {
    logger.error(
      { payment: id, authorizationId: payment.authorization },
      'payment not named by its authorization',
    )
    return 'kept'
  }
  const recorded = transactionOf(id)
  const use = await authorizationUse(deps, auth, BigInt(auth.fromBlock || payment.blockNumber || '0'))
  if (use?.canceled) {
    if (!cancelConfirmed(deps, use, chain.head)) return 'kept'
    return takeBack(deps, id, payment, auth.id, 'pending payment taken back: its authorization was canceled')
  }
  if (use && use.transaction.toLowerCase() !== recorded) {
    if (use.receipt?.status !== 'success' || !settles(deps, auth, use.receipt)) {
      logger.error(
        { payment: id, transaction: use.transaction },
        'authorization used by a transaction that did not settle it',
      )
      return 'kept'
    }
    if (!(await onFundingChain(deps.chain, logger))) return 'kept'
    const movedTo = paymentId(CHAIN_IDS[config.network], use.transaction, auth.id)
    const result = await ledger.move(id, movedTo, use.receipt.blockNumber)
    logger.warn(
      { payment: id, movedTo, result },
      'payment moved to the transaction that used its authorization',
    )
    if (result.status === 'refused') return 'kept'
    deps.searched.forget(auth.id)
    return 'done'
  }
  // Its own transaction used it (a read that lags the log): its receipt is back soon.
  if (use) return 'kept'
  // Unused as of a confirmed block whose time is past its validBefore ("unused" and "expired" of
  // one block): no later block, none older, can use it.
  const expires = expiresAt(deps, auth)
  const at = chain.head - BigInt(Math.max(config.confirmations - 1, 0))
  if (expires === null || (await deps.chain.blockTime(at)) < expires) return 'kept'
  const [payer, nonce] = payerAndNonce(auth)
  if (await deps.chain.authorizationUsed(payer, nonce, at)) {
    logger.error(
      { payment: id, authorizationId: auth.id },
      'authorization used, but no transaction found that used it; operator action needed',
    )
    return 'kept'
  }
  return takeBack(deps, id, payment, auth.id, 'pending payment taken back: its authorization expired unused')
}

async function takeBack(
  deps: WatchDeps,
  id: string,
  payment: Record<string, string>,
  authorizationId: string,
  why: string,
): Promise<'done' | 'kept'> {
  if (!(await onFundingChain(deps.chain, deps.logger))) return 'kept'
  const result = await deps.ledger.takeBack(id, payment.accountId!)
  deps.logger.warn({ payment: id, accountId: payment.accountId, result }, why)
  if (result.status === 'refused') return 'kept'
  deps.searched.forget(authorizationId)
  return 'done'
}
