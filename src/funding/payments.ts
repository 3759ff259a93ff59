// One payment from header to credit, shared by signup, refill and top-up: challenge, decode,
// check the terms, refuse replays, verify, claim the authorization, settle, credit pending.
// Knows nothing of Elysia; routes call it and add what is theirs (the account, the key).
import type { Logger } from 'pino'
import { type Address, getAddress, type Hex } from 'viem'
import type { FundingConfig } from '../config.ts'
import { ApiError } from '../http/errors.ts'
import { formatMicros, type MicroUsdc } from '../money/units.ts'
import type { FundingChain } from './chain.ts'
import { authorizationId, type CreditResult, type PaymentKind, type PaymentLedger } from './ledger.ts'
import { CHAIN_IDS, caip2 } from './network.ts'
import type { Settler } from './settler.ts'
import {
  decodePayment,
  MalformedPayment,
  type Payment,
  PaymentChallenge,
  type PaymentTerms,
  paymentRequirements,
  paymentResponseHeaders,
  type Requirements,
} from './wire.ts'

/** A payment that moved money and is on chain. */
export interface SettledPayment {
  payment: Payment
  payer: Address
  amount: MicroUsdc
  transaction: Hex
  blockNumber: bigint
  authorizationId: string
  /** X-PAYMENT-RESPONSE or PAYMENT-RESPONSE. */
  responseHeaders: Record<string, string>
}

export interface PayOptions {
  kind: PaymentKind
  terms: PaymentTerms
  headers: Headers
  /** The account to credit when known before settling (refill, an existing wallet's signup). */
  accountId?: (payer: Address) => Promise<string | undefined>
  /** Runs after the payment is decoded and before anything touches the chain (refill's 403). */
  checkPayer?: (payer: Address) => void | Promise<void>
  /** Runs right before the settlement call (signup's global fuse). */
  beforeSettle?: () => Promise<void>
}

/** 409: money moved, the request did not finish. Never carries `accepts`. */
export function moneyMoved(code: string, message: string, extra: Record<string, unknown>): ApiError {
  return new ApiError(409, code, message, { extra })
}

export class Payments {
  readonly chainId: number

  constructor(
    readonly config: FundingConfig,
    private readonly settler: Settler,
    private readonly ledger: PaymentLedger,
    private readonly chain: FundingChain,
    private readonly logger: Logger,
  ) {
    this.chainId = CHAIN_IDS[config.network]
  }

  requirements(terms: PaymentTerms): Requirements {
    return paymentRequirements(this.config, terms)
  }

  challenge(terms: PaymentTerms, reason = 'X-PAYMENT header is required'): PaymentChallenge {
    return new PaymentChallenge(this.requirements(terms), terms, reason)
  }

  /** Settles the request's payment, or throws the 402 / 403 / 409 / 429 that says why not. */
  async settle(options: PayOptions): Promise<SettledPayment> {
    const { terms } = options
    const requirements = this.requirements(terms)
    const refuse = (reason: string) => new PaymentChallenge(requirements, terms, reason)
    let payment: Payment | undefined
    try {
      payment = decodePayment(options.headers)
    } catch (error) {
      if (error instanceof MalformedPayment) throw refuse(`invalid payment header: ${error.message}`)
      throw error
    }
    if (!payment) throw refuse('X-PAYMENT header is required')
    const termsProblem = this.checkTerms(payment, terms.amount)
    if (termsProblem) throw refuse(termsProblem)

    const payer = payment.authorization.from
    await options.checkPayer?.(payer)
    const authId = authorizationId(this.chainId, this.config.usdcAddress, payer, payment.authorization.nonce)
    await this.refuseReplay(authId)

    const verification = await this.settler.verify(payment, requirements)
    if (!verification.isValid) throw refuse(`payment verification failed: ${verification.reason}`)
    await options.beforeSettle?.()

    const accountId = await options.accountId?.(payer)
    const fromBlock = await this.chain.blockNumber()
    const claim = await this.ledger.claim({
      authorizationId: authId,
      kind: options.kind,
      accountId,
      payer,
      amount: terms.amount,
      fromBlock,
    })
    if (!claim.claimed) await this.refuseReplay(authId)

    let transaction: Hex | undefined
    const onSent = async (hash: Hex) => {
      transaction = hash
      await this.ledger.markSent(authId, hash)
    }
    let settlement: Awaited<ReturnType<Settler['settle']>>
    try {
      settlement = await this.settler.settle(payment, requirements, onSent)
    } catch (error) {
      this.logger.error(
        { err: (error as Error).message, transaction, authorization: authId },
        'settlement failed',
      )
      if (transaction) throw this.reconciling(transaction)
      // Nothing recorded as sent; the reconciler checks the chain before it lets the claim go.
      throw new ApiError(
        502,
        'settle_failed',
        'payment settlement failed; the payment is being checked, do not sign again yet',
      )
    }
    if (settlement.status === 'failed') {
      await this.ledger.release(authId)
      throw refuse(`payment settlement failed: ${settlement.reason}`)
    }
    if (settlement.status === 'unconfirmed') throw this.reconciling(settlement.transaction)
    return {
      payment,
      payer,
      amount: terms.amount,
      transaction: settlement.transaction,
      blockNumber: settlement.blockNumber,
      authorizationId: authId,
      responseHeaders: paymentResponseHeaders(payment, {
        transaction: settlement.transaction,
        network: payment.version === 2 ? caip2(this.config.network) : this.config.network,
        payer,
      }),
    }
  }

  /** Credits a settled payment to an account's pending balance; a failed write is a 409. */
  async credit(settled: SettledPayment, accountId: string): Promise<CreditResult> {
    try {
      await this.ledger.setAccount(settled.authorizationId, accountId)
      const result = await this.ledger.credit({
        accountId,
        amount: settled.amount,
        chainId: this.chainId,
        transaction: settled.transaction,
        authorizationId: settled.authorizationId,
        blockNumber: settled.blockNumber,
        payer: settled.payer,
      })
      if (result.status === 'no_account') throw new Error(`account ${accountId} not found`)
      return result
    } catch (error) {
      throw this.creditFailed(settled, error)
    }
  }

  /** 409 `reconciling: false`: money moved and the credit could not be written. */
  creditFailed(settled: SettledPayment, error: unknown): ApiError {
    this.logger.error(
      {
        err: (error as Error).message,
        transaction: settled.transaction,
        authorization: settled.authorizationId,
      },
      'credit failed after settlement; left in flight for the reconciler or an operator',
    )
    return moneyMoved(
      'credit_failed',
      'the payment moved but its credit could not be written; quote the transaction to support',
      {
        reconciling: false,
        transaction: settled.transaction,
      },
    )
  }

  private reconciling(transaction: Hex): ApiError {
    return moneyMoved('payment_reconciling', 'the payment was sent; its credit is queued from the chain', {
      reconciling: true,
      transaction,
    })
  }

  /** An authorization seen before never settles again: credited, or still in flight. */
  private async refuseReplay(authId: string): Promise<void> {
    const record = await this.ledger.authorization(authId)
    if (!record) return
    if (record.state === 'credited') {
      const transaction = record.paymentId?.split(':')[1]
      throw moneyMoved(
        'payment_already_credited',
        'this payment was already settled and credited; it is not credited again',
        {
          credited: true,
          reconciling: false,
          transaction,
        },
      )
    }
    throw moneyMoved('payment_in_flight', 'this payment is already being settled', {
      reconciling: true,
      transaction: record.tx || undefined,
    })
  }

  private checkTerms(payment: Payment, amount: MicroUsdc): string | undefined {
    const config = this.config
    const same = (a: string | undefined, b: string) =>
      typeof a === 'string' && a.toLowerCase() === b.toLowerCase()
    if (payment.scheme !== 'exact') return 'scheme must be exact'
    if (payment.version === 1 && payment.network !== config.network)
      return `network must be ${config.network}`
    if (payment.version === 2) {
      const accepted = payment.accepted!
      if (accepted.network !== caip2(config.network)) return `network must be ${caip2(config.network)}`
      if (!same(accepted.asset, config.usdcAddress)) return 'asset is not the accepted USDC'
      if (!same(accepted.payTo, config.payTo)) return 'payTo is not the accepted recipient'
      if (accepted.amount !== String(amount)) return `amount must be exactly ${amount}`
    }
    if (getAddress(payment.authorization.to) !== getAddress(config.payTo))
      return 'authorization.to is not payTo'
    if (payment.authorization.value !== String(amount)) {
      return `authorization.value must be exactly ${amount} (${formatMicros(amount)} USDC)`
    }
    return undefined
  }
}
