// The loops every replica runs; the Lua scripts make each step happen once however many do.
// Confirmations: a pending credit whose block has SVC_CONFIRMATIONS confirmations (block number
// read fresh, no cache) and whose receipt is still on chain moves to confirmed; one whose
// transaction the chain lost follows its authorization (reorged.ts).
// Relayer: the key's sends left unmined, whichever replica sent them, are signed again with higher
// fees, or cancelled once they can never move money (src/funding/unmined.ts).
// Reconciler (reconciler.ts): a claim left in flight is finished from the chain.
import type { Logger } from 'pino'
import type { Address, Hex } from 'viem'
import type { FundingConfig } from '../config.ts'
import type { SearchMarks } from './authorization-use.ts'
import type { FundingChain } from './chain.ts'
import { type PaymentLedger, transactionOf } from './ledger.ts'
import { onFundingChain } from './on-chain.ts'
import { pagePast, type ReconcileCursor, reconcilePayments } from './reconciler.ts'
import { followAuthorization, searchUpTo } from './reorged.ts'

export interface WatchDeps {
  config: FundingConfig
  ledger: PaymentLedger
  chain: FundingChain
  logger: Logger
  /** The account a claim credits when it was made before the account existed (signup). */
  resolveAccount(payer: Address): Promise<string>
  /** Signs again with higher fees, or cancels, the relayer's sends left unmined; absent without one. */
  replaceUnmined?: () => Promise<number>
  /** How far this replica's searches for each authorization's use have reached. */
  searched: SearchMarks
}

/** The chain as one confirmations pass reads it: its head, and the last block confirmed at depth. */
export interface ConfirmedUpTo {
  head: bigint
  lastEligible: bigint
}

/**
 * Moves pending credits with enough confirmations to confirmed, from `cursor` on (a pass reads at
 * most PASS_PAGES pages, as the reconciler's do); returns how many moved.
 */
export async function confirmPayments(
  deps: WatchDeps,
  cursor: ReconcileCursor = { offset: 0 },
): Promise<number> {
  if (!(await onFundingChain(deps.chain, deps.logger))) return 0
  const head = await deps.chain.blockNumber()
  const chain = { head, lastEligible: head - BigInt(deps.config.confirmations) + 1n }
  let moved = 0
  // Past those that stay (a transfer a reorg took back waits at the front until its authorization
  // says where the money went, each pass a search), so they never hold back the payments behind.
  await pagePast(
    cursor,
    (offset, limit) => deps.ledger.unconfirmedUpTo(chain.lastEligible, limit, offset),
    async (id) => {
      const outcome = await confirmOne(deps, id, chain)
      if (outcome === 'confirmed') moved++
      return outcome === 'kept' ? 'kept' : 'left'
    },
  )
  return moved
}

/**
 * Confirms one payment: `confirmed`, `done` (it has left the list: confirmed before, moved to
 * another transaction, or taken back), or `kept` on the list (not yet, or no longer, on chain at
 * depth; or refused).
 */
async function confirmOne(
  deps: WatchDeps,
  id: string,
  chain: ConfirmedUpTo,
): Promise<'confirmed' | 'done' | 'kept'> {
  const payment = await deps.ledger.payment(id)
  if (!payment.accountId) return 'kept'
  // A reorg could have dropped the transfer: confirm only what the chain still holds.
  const receipt = await deps.chain.receipt(transactionOf(id) as Hex)
  if (receipt?.status === 'success') {
    if (receipt.blockNumber > chain.lastEligible) return 'kept'
    // Confirmed is spendable: a receipt whose block the chain no longer has at its height (a
    // node still on the fork a reorg left) counts as the transaction missing.
    const onChain = await deps.chain.onChain(receipt).catch((error) => {
      deps.logger.warn({ payment: id, err: error }, 'receipt block unreadable; retrying later')
      return undefined
    })
    if (onChain === undefined) return 'kept'
    if (!onChain) return followMissing(deps, id, payment, chain)
    if (!(await onFundingChain(deps.chain, deps.logger))) return 'kept'
    const result = await deps.ledger.confirm(id, payment.accountId)
    if (result.status === 'confirmed') return 'confirmed'
    if (result.status === 'nothing_to_do') return 'done'
    deps.logger.error({ payment: id, code: result.code }, 'confirm refused')
    return 'kept'
  }
  return followMissing(deps, id, payment, chain)
}

/**
 * A payment whose transaction the chain does not hold (gone, or mined again where it reverted):
 * once that has lasted, the authorization says where the money went.
 */
async function followMissing(
  deps: WatchDeps,
  id: string,
  payment: Record<string, string>,
  chain: ConfirmedUpTo,
): Promise<'done' | 'kept'> {
  if (BigInt(payment.blockNumber ?? '0') > searchUpTo(deps, chain)) return 'kept'
  try {
    return await followAuthorization(deps, id, payment, chain)
  } catch (error) {
    deps.logger.warn({ payment: id, err: error }, 'reorged payment unresolved; retrying later')
    return 'kept'
  }
}

/** Runs both loops on the configured interval; returns the stop function. */
export function startFundingWatch(deps: WatchDeps): () => void {
  let running = false
  const confirming: ReconcileCursor = { offset: 0 }
  const reconciling: ReconcileCursor = { offset: 0 }
  const timer = setInterval(async () => {
    if (running) return
    running = true
    try {
      await deps.replaceUnmined?.()
    } catch (error) {
      deps.logger.warn({ err: error }, 'relayer replacement failed; retrying')
    }
    try {
      await confirmPayments(deps, confirming)
      await reconcilePayments(deps, deps.config.receiptTimeoutMs, reconciling)
    } catch (error) {
      deps.logger.warn({ err: error }, 'funding watch tick failed')
    } finally {
      running = false
    }
  }, deps.config.watchIntervalMs)
  return () => clearInterval(timer)
}
