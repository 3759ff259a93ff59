// The loops every replica runs; the Lua scripts make each step happen once however many do.
// Confirmations: a pending credit whose block has SVC_CONFIRMATIONS confirmations (block number
// read fresh, no cache) and whose receipt is still on chain moves to confirmed.
// Relayer: its sends left unmined are signed again with higher fees (src/funding/relayer.ts).
// Reconciler: a claim left in flight (receipt timeout, crash, failed credit write) is finished
// from the chain: credited when its transfer is there, released only once no money can move: its
// authorization unused and expired. Until then a node's silence proves nothing (a lost broadcast,
// a lagging node, a sequencer that has it and a replica that does not), so the claim waits.
import type { Logger } from 'pino'
import { type Address, type Hex, isHash } from 'viem'
import type { FundingConfig } from '../config.ts'
import type { MicroUsdc } from '../money/units.ts'
import { type FundingChain, type Receipt, settlesAuthorization } from './chain.ts'
import type { InFlightPayment, PaymentLedger } from './ledger.ts'
import { CHAIN_IDS } from './network.ts'
import { CLOCK_SKEW_SECONDS } from './payments.ts'

export interface WatchDeps {
  config: FundingConfig
  ledger: PaymentLedger
  chain: FundingChain
  logger: Logger
  /** The account a claim credits when it was made before the account existed (signup). */
  resolveAccount(payer: Address): Promise<string>
  /** Signs again with higher fees the relayer's sends left unmined; absent without a relayer. */
  replaceUnmined?: () => Promise<number>
}

/** Moves every pending credit with enough confirmations to confirmed; returns how many moved. */
export async function confirmPayments(deps: WatchDeps): Promise<number> {
  const head = await deps.chain.blockNumber()
  const lastEligible = head - BigInt(deps.config.confirmations) + 1n
  let moved = 0
  // Page by page past those that stay (a transfer a reorg took back waits at the front for good),
  // so they never hold back the payments behind them.
  for (let kept = 0; ; ) {
    const ids = await deps.ledger.unconfirmedUpTo(lastEligible, CONFIRM_PAGE, kept)
    for (const id of ids) {
      const outcome = await confirmOne(deps, id, lastEligible)
      if (outcome === 'kept') kept++
      else if (outcome === 'confirmed') moved++
    }
    if (ids.length < CONFIRM_PAGE) return moved
  }
}

const CONFIRM_PAGE = 100

/**
 * Confirms one payment: `confirmed`, `done` (confirmed before: it has left the list too), or `kept`
 * on the list (not yet, or no longer, on chain at depth; or refused).
 */
async function confirmOne(
  deps: WatchDeps,
  id: string,
  lastEligible: bigint,
): Promise<'confirmed' | 'done' | 'kept'> {
  const payment = await deps.ledger.payment(id)
  if (!payment.accountId) return 'kept'
  // A reorg could have dropped the transfer: confirm only what the chain still holds.
  const receipt = await deps.chain.receipt(id.split(':')[1] as Hex)
  if (receipt?.status !== 'success' || receipt.blockNumber > lastEligible) return 'kept'
  const result = await deps.ledger.confirm(id, payment.accountId)
  if (result.status === 'confirmed') return 'confirmed'
  if (result.status === 'nothing_to_do') return 'done'
  deps.logger.error({ payment: id, code: result.code }, 'confirm refused')
  return 'kept'
}

/** Finishes claims older than `graceMs`; returns how many it credited. */
export async function reconcilePayments(
  deps: WatchDeps,
  graceMs = deps.config.receiptTimeoutMs,
): Promise<number> {
  let credited = 0
  for (const id of await deps.ledger.inFlightBefore(Date.now() - graceMs)) {
    const record = await deps.ledger.authorization(id)
    if (!record || record.state === 'credited') continue
    try {
      if (await reconcileOne(deps, record)) credited++
    } catch (error) {
      deps.logger.warn({ authorizationId: id, err: error }, 'reconcile failed; retrying later')
    }
  }
  return credited
}

async function reconcileOne(deps: WatchDeps, record: InFlightPayment): Promise<boolean> {
  const { chain, ledger, logger } = deps
  const [, , payer, nonce] = record.id.split(':') as [string, string, Address, Hex]
  // The recorded hash may be a facilitator's word for another transaction (or for none: not a
  // hash): it is credited only if it settled this authorization, else the token's own record below
  // says what happened.
  if (record.tx && isHash(record.tx)) {
    const receipt = await chain.receipt(record.tx as Hex)
    if (receipt?.status === 'success' && settles(deps, record, receipt))
      return creditTransfer(deps, record, record.tx as Hex, receipt)
  }
  // The chain's clock first, then the authorization's state as of that very block: "unused" and
  // "expired" must describe one block. Asked separately, a lagging node's "unused" (a block before
  // the transfer) and a fresh node's "expired" would release a claim whose money has moved.
  const latest = await chain.latest()
  if (!(await chain.authorizationUsed(payer, nonce, latest.number))) {
    // Unused at a block past its validBefore: the token refuses it for good (no later block is
    // older), no money moved, the claim goes (only as read: a request that marked it sent since
    // keeps it).
    if (latest.timestamp >= expiresAt(deps, record)) await ledger.release(record.id, record.tx ?? '')
    return false
  }
  // Used by a transaction we never recorded (a settlement call that failed after sending, a
  // replaced or front-run transaction): find it by the token's own record of the authorization.
  const transaction = record.fromBlock
    ? await chain.authorizationUse(payer, nonce, searchFrom(deps, BigInt(record.fromBlock)))
    : null
  const receipt = transaction ? await chain.receipt(transaction) : null
  if (!transaction || receipt?.status !== 'success') {
    logger.error(
      { authorizationId: record.id, fromBlock: record.fromBlock, transaction },
      'authorization used, but no transaction found that used it; operator action needed',
    )
    return false
  }
  return creditTransfer(deps, record, transaction, receipt)
}

/**
 * Where to look for the transaction that used a claim's authorization: from the head read before
 * settling, less the authorization's longest life in blocks of at least a second. A copy may have
 * been mined before the claim, under a verification read from a node that had not seen it yet.
 */
function searchFrom(deps: WatchDeps, fromBlock: bigint): bigint {
  const lifetime = BigInt(deps.config.maxTimeoutSeconds + CLOCK_SKEW_SECONDS)
  return fromBlock > lifetime ? fromBlock - lifetime : 0n
}

/**
 * When a claim's authorization can no longer be used, unix seconds: its validBefore, or for a claim
 * made before that was kept, the latest validBefore its terms allowed at the claim.
 */
function expiresAt(deps: WatchDeps, record: InFlightPayment): bigint {
  if (record.validBefore) return BigInt(record.validBefore)
  return BigInt(
    Math.ceil(Number(record.claimedAt) / 1000) + deps.config.maxTimeoutSeconds + CLOCK_SKEW_SECONDS,
  )
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

/** Whether a receipt settles the claim's authorization: used by the token, its amount paid to payTo. */
function settles(deps: WatchDeps, record: InFlightPayment, receipt: Receipt): boolean {
  const [, , , nonce] = record.id.split(':') as [string, string, Address, Hex]
  const { usdcAddress, payTo } = deps.config
  const authorization = { from: record.payer as Address, nonce, value: BigInt(record.amount) }
  return settlesAuthorization(receipt, usdcAddress, authorization, payTo)
}

/** Runs both loops on the configured interval; returns the stop function. */
export function startFundingWatch(deps: WatchDeps): () => void {
  let running = false
  const timer = setInterval(async () => {
    if (running) return
    running = true
    try {
      await deps.replaceUnmined?.()
    } catch (error) {
      deps.logger.warn({ err: error }, 'relayer replacement failed; retrying')
    }
    try {
      await confirmPayments(deps)
      await reconcilePayments(deps)
    } catch (error) {
      deps.logger.warn({ err: error }, 'funding watch tick failed')
    } finally {
      running = false
    }
  }, deps.config.watchIntervalMs)
  return () => clearInterval(timer)
}
