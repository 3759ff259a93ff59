// The reconciler: a claim left in flight (receipt timeout, crash, failed credit write) is finished
// from the chain: credited when its transfer is there, released only once no money can move: its
// authorization unused and expired, or canceled by the payer, as of a confirmed block. Until then a
// node's silence proves nothing (a lost broadcast, a lagging node, a sequencer that has it and a
// replica that does not), so the claim waits.
import type { Address, Hex } from 'viem'
import { isHash } from 'viem'
import type { MicroUsdc } from '../money/units.ts'
import { authorizationUse, cancelConfirmed, expiresAt, payerAndNonce, settles } from './authorization-use.ts'
import type { Receipt } from './chain.ts'
import type { InFlightPayment } from './ledger.ts'
import { CHAIN_IDS } from './network.ts'
import { onFundingChain } from './on-chain.ts'
import type { WatchDeps } from './watcher.ts'

/**
 * Where a replica's next pass of a loop starts on its list (the reconciler's claims in flight, the
 * confirmations watcher's unconfirmed payments): past the entries its passes kept. A pass reads at
 * most PASS_PAGES pages and the next resumes there, back at the front once a pass reaches the end,
 * so entries that stay on the list for good never hold back those behind.
 */
export interface ReconcileCursor {
  offset: number
}

export const PASS_PAGE = 100
export const PASS_PAGES = 10

/**
 * One pass over a list from `cursor` on: each page read by `read` (offset, limit), each entry
 * handled by `handle`, which says whether it stays on the list.
 */
export async function pagePast(
  cursor: ReconcileCursor,
  read: (offset: number, limit: number) => Promise<string[]>,
  handle: (id: string) => Promise<'kept' | 'left'>,
): Promise<void> {
  for (let page = 0; page < PASS_PAGES; page++) {
    const ids = await read(cursor.offset, PASS_PAGE)
    for (const id of ids) if ((await handle(id)) === 'kept') cursor.offset++
    if (ids.length < PASS_PAGE) {
      cursor.offset = 0
      return
    }
  }
}

/** Finishes claims older than `graceMs`, from `cursor` on; returns how many it credited. */
export async function reconcilePayments(
  deps: WatchDeps,
  graceMs = deps.config.receiptTimeoutMs,
  cursor: ReconcileCursor = { offset: 0 },
): Promise<number> {
  if (!(await onFundingChain(deps.chain, deps.logger))) return 0
  const before = Date.now() - graceMs
  let credited = 0
  await pagePast(
    cursor,
    (offset, limit) => deps.ledger.inFlightBefore(before, limit, offset),
    async (id) => {
      const outcome = await reconcileClaim(deps, id)
      if (outcome === 'credited') credited++
      if (outcome === 'kept') return 'kept'
      deps.searched.forget(id)
      return 'left'
    },
  )
  return credited
}

/** Finishes one claim: `credited`, `gone` (left the list: released, or credited by another), or `kept`. */
async function reconcileClaim(deps: WatchDeps, id: string): Promise<'credited' | 'gone' | 'kept'> {
  try {
    const record = await deps.ledger.authorization(id)
    // Credited, taken back or released meanwhile: another replica finished it.
    if (!record || (record.state !== 'claimed' && record.state !== 'sent')) return 'gone'
    if (await reconcileOne(deps, record)) return 'credited'
    return (await deps.ledger.inFlight(id)) ? 'kept' : 'gone'
  } catch (error) {
    deps.logger.warn({ authorizationId: id, err: error }, 'reconcile failed; retrying later')
    return 'kept'
  }
}

async function reconcileOne(deps: WatchDeps, record: InFlightPayment): Promise<boolean> {
  const { chain, ledger, logger } = deps
  const [payer, nonce] = payerAndNonce(record)
  // The recorded hash may be a facilitator's word for another transaction (or for none: not a
  // hash): it is credited only if it settled this authorization, else the token's own record below
  // says what happened.
  if (record.tx && isHash(record.tx)) {
    const receipt = await chain.receipt(record.tx as Hex)
    if (receipt?.status === 'success' && settles(deps, record, receipt))
      return creditTransfer(deps, record, record.tx as Hex, receipt)
  }
  const latest = await chain.latest()
  if (!(await chain.authorizationUsed(payer, nonce, latest.number))) {
    if ((await expiredUnused(deps, record, latest.number)) && (await onFundingChain(chain, logger)))
      await ledger.release(record.id, record.tx ?? '', 'expired')
    return false
  }
  // Used by a transaction we never recorded (a settlement call that failed after sending, a
  // replaced or front-run transaction): find it by the token's own record of the authorization.
  const use = record.fromBlock ? await authorizationUse(deps, record, BigInt(record.fromBlock)) : null
  if (use?.canceled) {
    // The token reads "used" for a cancellation too: the payer's, no transfer can use it any more,
    // no money moved. Released once confirmed (a reorg could take it out and let a copy be mined),
    // its record marked canceled; nothing to tell the operator.
    if (cancelConfirmed(deps, use, latest.number) && (await onFundingChain(chain, logger)))
      await ledger.release(record.id, record.tx ?? '', 'canceled')
    return false
  }
  if (use?.receipt?.status !== 'success') {
    logger.error(
      { authorizationId: record.id, fromBlock: record.fromBlock, transaction: use?.transaction ?? null },
      'authorization used, but no transaction found that used it; operator action needed',
    )
    return false
  }
  return creditTransfer(deps, record, use.transaction, use.receipt)
}

/**
 * Whether the claim's authorization is unused as of the confirmed block below `head` whose time is
 * past its validBefore: then the token refuses it for good (no later block is older), no money
 * moved, and the claim may go (only as read: a request that marked it sent since keeps it), its
 * record marked expired, refusing any later credit. Read at the head, a reorg within
 * SVC_CONFIRMATIONS could replace the blocks that say so with ones that mine the transfer, which
 * would then never be credited: this is the block the confirmations watcher takes a pending
 * payment back at. The block's clock first, then the authorization's state as of that very block:
 * asked separately, a lagging node's "unused" (a block before the transfer) and a fresh node's
 * "expired" would release a claim whose money has moved.
 */
async function expiredUnused(deps: WatchDeps, record: InFlightPayment, head: bigint): Promise<boolean> {
  const expires = expiresAt(deps, record)
  if (expires === null) return false
  const at = head - BigInt(Math.max(deps.config.confirmations - 1, 0))
  if (at < 0n || (await deps.chain.blockTime(at)) < expires) return false
  const [payer, nonce] = payerAndNonce(record)
  return !(await deps.chain.authorizationUsed(payer, nonce, at))
}

/** Credits a claim from a mined transaction, when it holds the transfer the claim promised. */
async function creditTransfer(
  deps: WatchDeps,
  record: InFlightPayment,
  transaction: Hex,
  receipt: Receipt,
): Promise<boolean> {
  const { config, ledger, logger } = deps
  if (!settles(deps, record, receipt)) {
    logger.error(
      { authorizationId: record.id, transaction },
      'in-flight transaction has no matching transfer',
    )
    return false
  }
  if (!(await onFundingChain(deps.chain, logger))) return false
  const accountId = record.accountId || (await deps.resolveAccount(record.payer as Address))
  const result = await ledger.credit({
    accountId,
    amount: Number(record.amount) as MicroUsdc,
    chainId: CHAIN_IDS[config.network],
    transaction,
    authorizationId: record.id,
    blockNumber: receipt.blockNumber,
    payer: record.payer,
  })
  logger.info({ authorizationId: record.id, transaction, result: result.status }, 'reconciled payment')
  return result.status === 'credited'
}
