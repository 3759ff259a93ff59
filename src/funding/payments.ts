// One payment from header to credit, shared by signup, refill and top-up: challenge, decode,
// check the terms, refuse replays, verify, claim the authorization, settle, credit pending.
// Knows nothing of Elysia; routes call it and add what is theirs (the account, the key).
import type { Logger } from 'pino'
import type { Address, Hex } from 'viem'
import { getAddress } from 'viem/utils'
import type { FundingConfig } from '../config.ts'
import { ApiError } from '../errors.ts'
import { formatMicros, type MicroUsdc } from '../money/units.ts'
import type { FundingChain } from './chain.ts'
import { authorizationId, type CreditResult, type PaymentKind, type PaymentLedger } from './ledger.ts'
import { CHAIN_IDS, caip2 } from './network.ts'
import { CANCELED, inFlight, moneyMoved, RELEASED, refuseReplay, TAKEN_BACK } from './replays.ts'
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
  /** The terms it was paid under: a credit refused as taken back challenges for them again. */
  terms: PaymentTerms
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
  /** Runs once the authorization is claimed and verified, right before settling (the signup fuse). */
  beforeSettle?: () => Promise<void>
}

// Clients set validBefore from their own clock (now + maxTimeoutSeconds): room for theirs to run ahead.
export const CLOCK_SKEW_SECONDS = 60

/**
 * Why an authorization's validity window is refused, if it is: expired, or usable for longer than
 * the terms allow (a long-lived signed authorization is a standing order whoever holds a copy can
 * settle, long after the payer has forgotten it).
 */
export function validityProblem(
  validBefore: string,
  maxTimeoutSeconds: number,
  nowSeconds = Math.floor(Date.now() / 1000),
): string | undefined {
  const before = BigInt(validBefore)
  if (before <= BigInt(nowSeconds)) return 'authorization.validBefore has passed: sign a new authorization'
  if (before > BigInt(nowSeconds + maxTimeoutSeconds + CLOCK_SKEW_SECONDS)) {
    return `authorization.validBefore must be at most maxTimeoutSeconds (${maxTimeoutSeconds}) from now`
  }
  return undefined
}

/** 502: unknown whether money moves; the claim stays, and the reconciler finds out from the chain. */
const beingChecked = () =>
  new ApiError(
    502,
    'settle_failed',
    'payment settlement failed; the payment is being checked, do not sign again yet',
  )

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
    refuseReplay(await this.ledger.authorization(authId), refuse)

    // Claimed before any chain or facilitator call: copies of one authorization, however many at
    // once, cost a few Redis round trips each and never reach verification or the fuse.
    const accountId = await options.accountId?.(payer)
    const claim = await this.ledger.claim({
      authorizationId: authId,
      kind: options.kind,
      accountId,
      payer,
      amount: terms.amount,
      validBefore: BigInt(payment.authorization.validBefore),
    })
    if (!claim.claimed) {
      refuseReplay(await this.ledger.authorization(authId), refuse)
      throw inFlight(claim.transaction)
    }
    let head: bigint
    try {
      const verification = await this.verify(payment, requirements, authId)
      if (!verification.isValid) throw refuse(`payment verification failed: ${verification.reason}`)
      await options.beforeSettle?.()
      // Where the reconciler starts looking for the transfer if the settlement call loses it.
      head = await this.chain.blockNumber().catch((error) => {
        this.logger.error({ err: error, authorizationId: authId }, 'chain head unreadable before settling')
        throw new ApiError(
          502,
          'verify_unavailable',
          'the chain could not be read right now; nothing was sent, retry shortly',
        )
      })
      await this.ledger.recordFromBlock(authId, head)
    } catch (error) {
      // Nothing was sent: the payer may sign again (or retry this one after the fuse).
      await this.ledger
        .release(authId)
        .catch((releaseError) =>
          this.logger.warn(
            { err: (releaseError as Error).message, authorizationId: authId },
            'claim not released; the reconciler lets it go',
          ),
        )
      throw error
    }

    let transaction: Hex | undefined
    // Recorded before it is broadcast; a claim no longer in flight throws, and nothing is sent.
    const onSent = async (hash: Hex) => {
      await this.ledger.markSent(authId, hash)
      transaction = hash
    }
    let settlement: Awaited<ReturnType<Settler['settle']>>
    try {
      settlement = await this.settler.settle(payment, requirements, onSent)
    } catch (error) {
      this.logger.error({ err: error, transaction, authorizationId: authId }, 'settlement failed')
      if (transaction) throw this.reconciling(transaction)
      // Nothing recorded as sent; the reconciler checks the chain before it lets the claim go.
      throw beingChecked()
    }
    if (settlement.status === 'failed') {
      // Ours moved nothing, but a copy of the authorization may have settled in another
      // transaction first: then the claim stays and the reconciler credits that transfer. A
      // refusal that says so is believed over a read at the head, which a lagging node answers.
      const used =
        settlement.authorizationUsed ||
        (await this.chain.authorizationUsed(payer, payment.authorization.nonce).catch((error) => {
          // Unknown whether a copy settled: the claim stays, and the reconciler finds out.
          this.logger.error({ err: error, authorizationId: authId }, 'authorization state unreadable')
          throw beingChecked()
        }))
      if (used) {
        // The token reads the payer's cancellation as "used" too: then nothing moved, a challenge.
        const cancellation = await this.cancellation(payer, payment.authorization.nonce, head, authId)
        if (cancellation) {
          // Kept on the claim, so a replay before the reconciler releases it is answered alike.
          await this.ledger.noteCanceled(authId, cancellation).catch((error) => {
            this.logger.warn(
              { err: (error as Error).message, authorizationId: authId },
              'cancellation not noted',
            )
          })
          throw refuse(`payment settlement failed: ${CANCELED}`)
        }
        this.logger.warn(
          { transaction: settlement.transaction, authorizationId: authId },
          'authorization used by another transaction; left to the reconciler',
        )
        throw moneyMoved(
          'payment_reconciling',
          'the payment was settled; its credit is queued from the chain',
          {
            reconciling: true,
          },
        )
      }
      // Never sent (refused before signing): nothing of ours can move money, the claim goes. A
      // transaction that was sent and reverted stays claimed: a reorg could mine it again, so only
      // the reconciler lets it go, once the authorization has expired unused.
      if (settlement.unsent) {
        await this.ledger.release(authId)
        throw refuse(`payment settlement failed: ${settlement.reason}`)
      }
      if (!settlement.transaction) {
        // A remote facilitator's refusal with no hash may hide a broadcast whose reply was lost:
        // unknown whether money moves, so the claim stays for the reconciler, as for a thrown call.
        this.logger.error(
          { reason: settlement.reason, authorizationId: authId },
          'settlement refused without a transaction; left to the reconciler',
        )
        throw beingChecked()
      }
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
      terms,
      responseHeaders: paymentResponseHeaders(payment, {
        transaction: settlement.transaction,
        network: payment.version === 2 ? caip2(this.config.network) : this.config.network,
        payer,
      }),
    }
  }

  /**
   * The payer's cancellation (AuthorizationCanceled) that the token's "used" is, if it is one,
   * searched over the authorization's life before `head`: no money moved. The claim stays for the
   * reconciler, which releases it once the cancellation is confirmed. A failed search is a 502, as
   * for the state.
   */
  private async cancellation(payer: Address, nonce: Hex, head: bigint, authId: string): Promise<Hex | null> {
    const life = BigInt(this.config.maxTimeoutSeconds + CLOCK_SKEW_SECONDS)
    const search = this.chain.authorizationUse(payer, nonce, head > life ? head - life : 0n)
    const { end } = await search.catch((error) => {
      this.logger.error({ err: error, authorizationId: authId }, 'authorization use unreadable')
      throw beingChecked()
    })
    return end?.canceled === true ? end.transaction : null
  }

  /** The settler's verification; a call that fails (RPC or facilitator unreachable) is a 502. */
  private async verify(payment: Payment, requirements: Requirements, authId: string) {
    try {
      return await this.settler.verify(payment, requirements)
    } catch (error) {
      this.logger.error({ err: error, authorizationId: authId }, 'payment verification call failed')
      throw new ApiError(
        502,
        'verify_unavailable',
        'the payment could not be verified right now; nothing was sent, retry shortly',
      )
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
      if (result.status === 'taken_back') throw this.challenge(settled.terms, TAKEN_BACK)
      if (result.status === 'released') throw this.challenge(settled.terms, RELEASED[result.state])
      return result
    } catch (error) {
      if (error instanceof PaymentChallenge) throw error
      throw this.creditFailed(settled, error)
    }
  }

  /** 409 `reconciling: false`: money moved and the credit could not be written. */
  creditFailed(settled: SettledPayment, error: unknown): ApiError {
    this.logger.error(
      {
        err: error,
        transaction: settled.transaction,
        authorizationId: settled.authorizationId,
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
    return validityProblem(payment.authorization.validBefore, config.maxTimeoutSeconds)
  }
}
