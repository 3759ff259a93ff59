// Two loops every replica may run; the Lua scripts make each step happen once however many do.
// Confirmations: a pending credit whose block has SVC_CONFIRMATIONS confirmations (block number
// read fresh, no cache) and whose receipt is still on chain moves to confirmed.
// Reconciler: a claim left in flight (receipt timeout, crash, failed credit write) is finished
// from the chain: credited when its transfer is there, released only once no money can move: its
// authorization unused and expired. Until then a node's silence proves nothing (a lost broadcast,
// a lagging node, a sequencer that has it and a replica that does not), so the claim waits.
import type { Logger } from 'pino'
import type { Address, Hex } from 'viem'
import type { FundingConfig } from '../config.ts'
import type { MicroUsdc } from '../money/units.ts'
import { type FundingChain, hasTransfer, type Receipt } from './chain.ts'
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
}

/** Moves every pending credit with enough confirmations to confirmed; returns how many moved. */
export async function confirmPayments(deps: WatchDeps): Promise<number> {
  const head = await deps.chain.blockNumber()
  const lastEligible = head - BigInt(deps.config.confirmations) + 1n
  let moved = 0
  for (const id of await deps.ledger.unconfirmedUpTo(lastEligible)) {
    const payment = await deps.ledger.payment(id)
    if (!payment.accountId) continue
    // A reorg could have dropped the transfer: confirm only what the chain still holds.
    const receipt = await deps.chain.receipt(id.split(':')[1] as Hex)
    if (receipt?.status !== 'success' || receipt.blockNumber > lastEligible) continue
    const result = await deps.ledger.confirm(id, payment.accountId)
    if (result.status === 'confirmed') moved++
    else if (result.status === 'refused')
      deps.logger.error({ payment: id, code: result.code }, 'confirm refused')
  }
  return moved
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
  if (record.tx) {
    const receipt = await chain.receipt(record.tx as Hex)
    if (receipt?.status === 'success') return creditTransfer(deps, record, record.tx as Hex, receipt)
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
  if (
    !hasTransfer(receipt, config.usdcAddress, record.payer as Address, config.payTo, BigInt(record.amount))
  ) {
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

/** Runs both loops on the configured interval; returns the stop function. */
export function startFundingWatch(deps: WatchDeps): () => void {
  let running = false
  const timer = setInterval(async () => {
    if (running) return
    running = true
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
