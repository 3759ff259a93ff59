// The Redis side of funding: claims on authorizations (the "payment in flight" records), credits
// of settled payments to pending, and their confirmation. Every money move is one Lua script.
import type { MicroUsdc } from '../money/units.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import { ACCOUNT_TABLE, type Keyspace } from '../redis/keys.ts'
import { PaymentCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import {
  movePayment,
  movePending,
  paymentNow,
  paymentsOf,
  type ReorgedResult,
  takeBackPayment,
} from './reorged-ledger.ts'

export type PaymentKind = 'signup' | 'refill' | 'topup'

/** One EIP-3009 authorization: it can move money once, whatever is replayed. */
export function authorizationId(chainId: number, token: string, payer: string, nonce: string): string {
  return `${chainId}:${token}:${payer}:${nonce}`.toLowerCase()
}

/**
 * One settled payment: an authorization used by a transaction on a chain, <chainId>:<txHash>:<payer>:<nonce>.
 * One transaction may use several authorizations (a batch of transferWithAuthorization calls): each
 * is a payment of its own. The transaction stays second, so a payment of either shape names it there.
 */
export function paymentId(chainId: number, transaction: string, authorizationId: string): string {
  const [, , payer, nonce] = authorizationId.split(':')
  return `${chainId}:${transaction}:${payer}:${nonce}`.toLowerCase()
}

/** A payment's id as recorded before one transaction could carry several, <chainId>:<txHash>: still read. */
export function transactionPaymentId(chainId: number, transaction: string): string {
  return `${chainId}:${transaction}`.toLowerCase()
}

/** The transaction a payment id names, either shape. */
export function transactionOf(paymentIdValue: string): string {
  return paymentIdValue.split(':')[1] ?? ''
}

export interface Claim {
  authorizationId: string
  kind: PaymentKind
  accountId: string | undefined
  payer: string
  amount: MicroUsdc
  /** Known later when the claim comes first (recordFromBlock); empty until then. */
  fromBlock?: bigint
  /** The authorization's validBefore (unix seconds): it may move money until the chain passes it. */
  validBefore: bigint
}

export type ClaimResult =
  | { claimed: true }
  | { claimed: false; state: string; transaction: string | undefined }

export interface Credit {
  accountId: string
  amount: MicroUsdc
  chainId: number
  transaction: string
  authorizationId: string
  blockNumber: bigint
  payer: string
}

export type CreditResult =
  | { status: 'credited'; pending: MicroUsdc; funded: MicroUsdc }
  | { status: 'already_credited'; paymentId: string }
  /** The authorization's payment was taken back: this credit's transaction is of a lost fork. */
  | { status: 'taken_back'; paymentId: string }
  /** The authorization's claim was released, expired unused or canceled: this credit's transaction is of a lost fork. */
  | { status: 'released'; state: ReleasedAs }
  | { status: 'no_account' }

export type ConfirmResult =
  | { status: 'confirmed'; confirmed: MicroUsdc; pending: MicroUsdc }
  | { status: 'nothing_to_do' }
  | { status: 'refused'; code: number }

/** How the reconciler released a claim that can move no money, kept on its record (lua/release-payment.lua). */
export type ReleasedAs = 'expired' | 'canceled'

/** An authorization record as stored (see keys.authorization). */
export interface InFlightPayment {
  id: string
  state: 'claimed' | 'sent' | 'credited' | 'taken back' | ReleasedAs
  kind: PaymentKind
  accountId: string
  payer: string
  amount: string
  fromBlock: string
  claimedAt: string
  /** Unix seconds; absent on a claim made before it was kept. */
  validBefore?: string
  tx?: string
  /** once credited: its payment's id (paymentId; <chainId>:<txHash> when recorded before) */
  paymentId?: string
  /** the payer's cancellation seen while the claim was in flight (its transaction) */
  canceledTx?: string
}

export class PaymentLedger {
  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    /** How long a moved or taken-back payment's old id still answers lookups (SVC_RECORD_RETENTION_DAYS). */
    private readonly recordRetentionMs: number = DEFAULT_RECORD_RETENTION_MS,
  ) {}

  async claim(claim: Claim): Promise<ClaimResult> {
    const result = (await runScript(
      this.store,
      'claimPayment',
      [this.keys.authorization(claim.authorizationId), this.keys.paymentsInFlight],
      {
        authorizationId: claim.authorizationId,
        kind: claim.kind,
        accountId: claim.accountId ?? '',
        payer: claim.payer,
        amount: claim.amount,
        fromBlock: claim.fromBlock?.toString() ?? '',
        validBefore: claim.validBefore.toString(),
      },
    )) as [number, string?, string?]
    if (result[0] === PaymentCode.Done) return { claimed: true }
    if (result[0] === PaymentCode.AlreadyDone)
      return { claimed: false, state: result[1] ?? '', transaction: result[2] || undefined }
    throw new Error(`claim-payment refused the claim (${result[0]})`)
  }

  /** The chain's head just before settling: the transfer, if any, is in a later block. */
  async recordFromBlock(authorizationId: string, block: bigint): Promise<void> {
    await this.note(authorizationId, ['fromBlock', block.toString()])
  }

  /**
   * Records the transaction hash on the claim, before the transaction is broadcast; throws when
   * the claim is no longer in flight, so nothing is broadcast for it.
   */
  async markSent(authorizationId: string, transaction: string): Promise<void> {
    await this.note(authorizationId, ['state', 'sent', 'tx', transaction])
  }

  /** The payer's cancellation, seen at the head (unconfirmed: the claim stays); a replay reads it. */
  async noteCanceled(authorizationId: string, transaction: string): Promise<void> {
    await this.note(authorizationId, ['canceledTx', transaction])
  }

  private async note(authorizationId: string, fields: string[]): Promise<void> {
    const written = await runScript(
      this.store,
      'notePayment',
      [this.keys.authorization(authorizationId)],
      {},
      fields,
    )
    if (written !== PaymentCode.Done)
      throw new Error(`payment claim ${authorizationId} is no longer in flight`)
  }

  /**
   * Sets the account on a claim made before the account existed (signup). Only a claim in flight
   * is written: a record credited or taken back meanwhile is left as it is, and the credit after
   * answers from it.
   */
  async setAccount(authorizationId: string, accountId: string): Promise<void> {
    await runScript(this.store, 'notePayment', [this.keys.authorization(authorizationId)], {}, [
      'accountId',
      accountId,
    ])
  }

  /**
   * Releases a claim still as read: with this transaction hash, or none ("", the default). A
   * request's own claim, nothing sent, is dropped; the reconciler's keeps its record, marked `as`.
   */
  async release(authorizationId: string, transaction = '', as: ReleasedAs | '' = ''): Promise<boolean> {
    const released = await runScript(
      this.store,
      'releasePayment',
      [this.keys.authorization(authorizationId), this.keys.paymentsInFlight],
      { authorizationId, transaction, mark: as, recordRetentionMs: this.recordRetentionMs },
    )
    return released === PaymentCode.Done
  }

  async credit(credit: Credit): Promise<CreditResult> {
    const id = paymentId(credit.chainId, credit.transaction, credit.authorizationId)
    const apart = this.keys.layout === 'apart'
    // Held apart, the account is on another slot: checked first, credited after the record.
    if (apart && (await this.store.hget(this.keys.account(credit.accountId), 'id')) !== credit.accountId) {
      return { status: 'no_account' }
    }
    const record = [
      this.keys.payment(id),
      this.keys.authorization(credit.authorizationId),
      this.keys.paymentsInFlight,
      this.keys.paymentsUnconfirmed,
      this.keys.transactionPayments(transactionPaymentId(credit.chainId, credit.transaction)),
    ]
    let result = (await runScript(
      this.store,
      'creditPayment',
      apart ? record : [...record, this.keys.account(credit.accountId)],
      {
        accountId: credit.accountId,
        amount: credit.amount,
        paymentId: id,
        authorizationId: credit.authorizationId,
        blockNumber: credit.blockNumber.toString(),
        payer: credit.payer,
        table: ACCOUNT_TABLE,
      },
    )) as [number, string?, string?]
    if (apart && result[0] === PaymentCode.Done) result = await this.creditAccount(id)
    // Recorded before, perhaps by a replica that stopped before the account's step: finished here.
    if (apart && result[0] === PaymentCode.AlreadyDone) await this.creditAccount(result[1] ?? id)
    switch (result[0]) {
      case PaymentCode.Done:
        return {
          status: 'credited',
          pending: Number(result[1]) as MicroUsdc,
          funded: Number(result[2]) as MicroUsdc,
        }
      case PaymentCode.AlreadyDone:
        return { status: 'already_credited', paymentId: result[1] ?? id }
      case PaymentCode.TakenBack:
        return { status: 'taken_back', paymentId: result[1] ?? id }
      case PaymentCode.Released:
        return { status: 'released', state: result[1] as ReleasedAs }
      case PaymentCode.NoAccount:
        return { status: 'no_account' }
      default:
        throw new Error(`credit-payment refused the credit (${result[0]})`)
    }
  }

  /**
   * The account's step of a credit held apart (lua/credit-pending.lua), for a recorded payment:
   * idempotent by payment, so a credit or a confirmation may run it again to finish a half-done one.
   */
  private async creditAccount(paymentIdValue: string): Promise<[number, string?, string?]> {
    const [accountId, amount] = await this.store.hmget(
      this.keys.payment(paymentIdValue),
      'accountId',
      'amount',
    )
    if (!accountId || !amount) return [PaymentCode.NoAccount]
    const reply = (await runScript(
      this.store,
      'creditPending',
      [this.keys.account(accountId), this.keys.accountPayments(accountId)],
      { accountId, paymentId: paymentIdValue, amount, table: ACCOUNT_TABLE },
    )) as [number, string?, string?]
    return reply[0] === PaymentCode.AlreadyDone ? [PaymentCode.AlreadyDone, paymentIdValue] : reply
  }

  async confirm(paymentIdValue: string, accountId: string): Promise<ConfirmResult> {
    if (this.keys.layout === 'apart') return this.confirmApart(paymentIdValue, accountId)
    const result = (await runScript(
      this.store,
      'confirmPayment',
      [
        this.keys.payment(paymentIdValue),
        this.keys.paymentsUnconfirmed,
        this.keys.account(accountId),
        this.keys.webhookHooks(`acct:${accountId}`),
        this.keys.webhookEvents(`acct:${accountId}`),
        this.keys.webhookDue(`acct:${accountId}`),
      ],
      { paymentId: paymentIdValue, accountId },
    )) as [number, string?, string?]
    if (result[0] === PaymentCode.Done) {
      return {
        status: 'confirmed',
        confirmed: Number(result[1]) as MicroUsdc,
        pending: Number(result[2]) as MicroUsdc,
      }
    }
    if (result[0] === PaymentCode.AlreadyDone) return { status: 'nothing_to_do' }
    return { status: 'refused', code: result[0] }
  }

  /**
   * A confirmation held apart: the account's step first (its credit finished if a replica stopped
   * before it, then pending to confirmed, lua/confirm-pending.lua), then the payment marked
   * (lua/confirm-payment.lua). A replica that stops between the two leaves the payment pending on
   * the watcher's list; its next pass finds the account's step done and marks it.
   */
  private async confirmApart(paymentIdValue: string, accountId: string): Promise<ConfirmResult> {
    const mark = () =>
      runScript(
        this.store,
        'confirmPayment',
        [this.keys.payment(paymentIdValue), this.keys.paymentsUnconfirmed],
        {
          paymentId: paymentIdValue,
          accountId,
        },
      )
    const [state, owner, amount, movedFrom] = await this.store.hmget(
      this.keys.payment(paymentIdValue),
      'state',
      'accountId',
      'amount',
      'movedFrom',
    )
    if (state !== 'pending') {
      await mark()
      return { status: 'nothing_to_do' }
    }
    if (owner !== accountId || !amount) return { status: 'refused', code: PaymentCode.NoAccount }
    // A payment moved from another transaction: the account lists it in the old one's place first.
    if (movedFrom) await movePending(this.store, this.keys, accountId, movedFrom, paymentIdValue)
    await this.creditAccount(paymentIdValue)
    const result = (await runScript(this.store, 'confirmPending', [this.keys.accountBase(accountId)], {
      accountId,
      paymentId: paymentIdValue,
      amount,
    })) as [number, string?, string?]
    if (result[0] !== PaymentCode.Done && result[0] !== PaymentCode.AlreadyDone) {
      return { status: 'refused', code: result[0] }
    }
    await mark()
    if (result[0] === PaymentCode.AlreadyDone) return { status: 'nothing_to_do' }
    return {
      status: 'confirmed',
      confirmed: Number(result[1]) as MicroUsdc,
      pending: Number(result[2]) as MicroUsdc,
    }
  }

  /** Moves a pending payment to the transaction that did use its authorization (reorged-ledger.ts). */
  move(paymentIdValue: string, movedTo: string, blockNumber: bigint): Promise<ReorgedResult> {
    return movePayment(this.store, this.keys, paymentIdValue, movedTo, blockNumber, this.recordRetentionMs)
  }

  /** Takes back a pending payment whose authorization expired unused (reorged-ledger.ts). */
  takeBack(paymentIdValue: string, accountId: string): Promise<ReorgedResult> {
    return takeBackPayment(this.store, this.keys, paymentIdValue, accountId, this.recordRetentionMs)
  }

  /** Payments credited in blocks up to `block`, oldest first: those now confirmed enough. */
  unconfirmedUpTo(block: bigint, limit = 100, offset = 0): Promise<string[]> {
    return this.store.zrangebyscore(
      this.keys.paymentsUnconfirmed,
      '-inf',
      block.toString(),
      'LIMIT',
      offset,
      limit,
    )
  }

  /** The ids of the payments a transaction was credited with or moved to (reorged-ledger.ts). */
  paymentsOf(chainId: number, transaction: string): Promise<string[]> {
    return paymentsOf(this.store, this.keys, transactionPaymentId(chainId, transaction))
  }

  async paymentAccount(paymentIdValue: string): Promise<string | null> {
    return this.store.hget(this.keys.payment(paymentIdValue), 'accountId')
  }

  async payment(paymentIdValue: string): Promise<Record<string, string>> {
    return this.store.hgetall(this.keys.payment(paymentIdValue))
  }

  /** The payment an id names now: its own, or the one it moved to (reorged-ledger.ts). */
  paymentNow(paymentIdValue: string): Promise<{ id: string; payment: Record<string, string> } | null> {
    return paymentNow(this.store, this.keys, paymentIdValue)
  }

  async authorization(authorizationIdValue: string): Promise<InFlightPayment | null> {
    const record = await this.store.hgetall(this.keys.authorization(authorizationIdValue))
    return record.state ? (record as unknown as InFlightPayment) : null
  }

  /** Claims older than `before` (ms) not yet credited: the reconciler's work, oldest first. */
  inFlightBefore(before: number, limit = 100, offset = 0): Promise<string[]> {
    return this.store.zrangebyscore(
      this.keys.paymentsInFlight,
      '-inf',
      String(before),
      'LIMIT',
      offset,
      limit,
    )
  }

  /** Whether a claim is still in flight: on the reconciler's list. */
  async inFlight(authorizationIdValue: string): Promise<boolean> {
    return (await this.store.zscore(this.keys.paymentsInFlight, authorizationIdValue)) !== null
  }
}
