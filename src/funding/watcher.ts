// Two loops every replica may run; the Lua scripts make each step happen once however many do.
// Confirmations: a pending credit whose block has SVC_CONFIRMATIONS confirmations (block number
// read fresh, no cache) and whose receipt is still on chain moves to confirmed.
// Reconciler: a claim left in flight (receipt timeout, crash, failed credit write) is finished
// from the chain: credited when its transfer is there, released when no money moved.
import type { Logger } from 'pino'
import type { Address, Hex } from 'viem'
import type { FundingConfig } from '../config.ts'
import type { MicroUsdc } from '../money/units.ts'
import { type FundingChain, hasTransfer } from './chain.ts'
import type { InFlightPayment, PaymentLedger } from './ledger.ts'
import { CHAIN_IDS } from './network.ts'

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
      if (await reconcileOne(deps, record, graceMs)) credited++
    } catch (error) {
      deps.logger.warn(
        { authorization: id, err: (error as Error).message },
        'reconcile failed; retrying later',
      )
    }
  }
  return credited
}

async function reconcileOne(deps: WatchDeps, record: InFlightPayment, graceMs: number): Promise<boolean> {
  const { chain, ledger, config, logger } = deps
  const [, , payer, nonce] = record.id.split(':') as [string, string, Address, Hex]
  const stale = Date.now() - Number(record.claimedAt) > 2 * graceMs
  if (record.tx) {
    const receipt = await chain.receipt(record.tx as Hex)
    if (receipt?.status === 'success') {
      if (!hasTransfer(receipt, config.usdcAddress, payer, config.payTo, BigInt(record.amount))) {
        logger.error(
          { authorization: record.id, transaction: record.tx },
          'in-flight transaction has no matching transfer',
        )
        return false
      }
      const accountId = record.accountId || (await deps.resolveAccount(record.payer as Address))
      const result = await ledger.credit({
        accountId,
        amount: Number(record.amount) as MicroUsdc,
        chainId: CHAIN_IDS[config.network],
        transaction: record.tx,
        authorizationId: record.id,
        blockNumber: receipt.blockNumber,
        payer: record.payer,
      })
      logger.info(
        { authorization: record.id, transaction: record.tx, result: result.status },
        'reconciled payment',
      )
      return result.status === 'credited'
    }
    if (receipt?.status === 'reverted') {
      await ledger.release(record.id)
      return false
    }
    // Not mined: wait while a node still knows it; let it go only when the nonce is unused.
    if (!stale || (await chain.known(record.tx as Hex))) return false
  } else if (!stale) {
    return false
  }
  if (await chain.authorizationUsed(payer, nonce)) {
    logger.error(
      { authorization: record.id },
      'authorization used by a transaction we did not record; operator action needed',
    )
    return false
  }
  await ledger.release(record.id)
  return false
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
      deps.logger.warn({ err: (error as Error).message }, 'funding watch tick failed')
    } finally {
      running = false
    }
  }, deps.config.watchIntervalMs)
  return () => clearInterval(timer)
}
