// Settlement behind one interface, two ways: the gateway as its own facilitator (its relayer key
// sends transferWithAuthorization) or a remote facilitator URL (x402 /verify and /settle).
// Verification of the signed authorization is the x402 packages' own (@x402/evm's exact scheme:
// EIP-712 signature, payTo, validity window, exact amount, and a simulated transfer that catches
// a used nonce or a short balance).
import { HTTPFacilitatorClient } from '@x402/core/http'
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types'
import { ExactEvmScheme } from '@x402/evm/exact/facilitator'
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/facilitator'
import { encodeFunctionData, type Hex, isHash, parseSignature } from 'viem'
import type { FundingConfig } from '../config.ts'
import { shortMessage } from '../logger.ts'
import { eip3009Abi, type FundingChain, type Receipt, settlesAuthorization } from './chain.ts'
import { NotSent, type Relayer } from './relayer.ts'
import type { SendTurns } from './sender-lock.ts'
import type { Payment, Requirements } from './wire.ts'

export interface Verification {
  isValid: boolean
  reason?: string
}

export type Settlement =
  /** Included in a block with the promised transfer. */
  | { status: 'settled'; transaction: Hex; blockNumber: bigint }
  /** Sent, but no receipt in time: the reconciler finishes it. */
  | { status: 'unconfirmed'; transaction: Hex }
  /**
   * Not settled: refused, or reverted on chain. `unsent` only when nothing can have been broadcast
   * (refused before signing); a refusal without a transaction hash proves nothing else.
   * `authorizationUsed`: the refusal itself says the token has seen the authorization used (the
   * relayer's gas estimate ran on a node that has the block a lagging read may not).
   */
  | { status: 'failed'; reason: string; transaction?: Hex; unsent?: true; authorizationUsed?: true }

export interface Settler {
  verify(payment: Payment, requirements: Requirements): Promise<Verification>
  /** Settles; `onSent` records the hash the moment it is known, before the receipt is awaited. */
  settle(
    payment: Payment,
    requirements: Requirements,
    onSent: (transaction: Hex) => Promise<void>,
  ): Promise<Settlement>
}

// USDC's revert for an authorization already used or canceled ("FiatTokenV2: authorization is used
// or canceled"; the test token's "authorization is used").
const USED_REVERT = /authorization is used/i

// The x402 types name v1 networks as CAIP-2; the v1 scheme reads the v1 names. Same objects.
const asPayload = (payment: Payment) => payment.payload as unknown as PaymentPayload
const requirementsFor = (payment: Payment, requirements: Requirements) =>
  (payment.version === 1 ? requirements.v1 : requirements.v2) as unknown as PaymentRequirements

export class SelfSettler implements Settler {
  private readonly v1: ExactEvmSchemeV1
  private readonly v2: ExactEvmScheme

  constructor(
    private readonly config: FundingConfig,
    private readonly chain: FundingChain,
    private readonly relayer: Relayer,
    /** The relayer key's turns across the replicas that share it. */
    private readonly turns?: SendTurns,
  ) {
    // Verification only reads the chain; sending goes through the relayer's queue.
    const client = chain.client
    const signer = {
      getAddresses: () => [relayer.account.address] as const,
      readContract: (args: Parameters<typeof client.readContract>[0]) => client.readContract(args),
      verifyTypedData: (args: Parameters<typeof client.verifyTypedData>[0]) => client.verifyTypedData(args),
      getCode: (args: { address: Hex }) => client.getCode(args),
      writeContract: () => Promise.reject(new Error('verify only')),
      sendTransaction: () => Promise.reject(new Error('verify only')),
      waitForTransactionReceipt: () => Promise.reject(new Error('verify only')),
    }
    // biome-ignore lint/suspicious/noExplicitAny: viem's generic call signatures against the scheme's loose ones
    this.v1 = new ExactEvmSchemeV1(signer as any)
    // biome-ignore lint/suspicious/noExplicitAny: as above
    this.v2 = new ExactEvmScheme(signer as any)
  }

  async verify(payment: Payment, requirements: Requirements): Promise<Verification> {
    const scheme = payment.version === 1 ? this.v1 : this.v2
    const result = await scheme.verify(asPayload(payment), requirementsFor(payment, requirements))
    return result.isValid
      ? { isValid: true }
      : { isValid: false, reason: result.invalidReason ?? 'invalid payment' }
  }

  async settle(
    payment: Payment,
    _requirements: Requirements,
    onSent: (transaction: Hex) => Promise<void>,
  ): Promise<Settlement> {
    const a = payment.authorization
    const args = [
      a.from,
      a.to,
      BigInt(a.value),
      BigInt(a.validAfter),
      BigInt(a.validBefore),
      a.nonce,
    ] as const
    // A 65-byte signature goes to the (v, r, s) form every USDC version has.
    const data =
      payment.signature.length === 132
        ? (() => {
            const { r, s, v, yParity } = parseSignature(payment.signature)
            const recovery = Number(v ?? BigInt(yParity + 27))
            return encodeFunctionData({
              abi: eip3009Abi,
              functionName: 'transferWithAuthorization',
              args: [...args, recovery, r, s],
            })
          })()
        : encodeFunctionData({
            abi: eip3009Abi,
            functionName: 'transferWithAuthorization',
            args: [...args, payment.signature],
          })
    let transaction: Hex
    try {
      transaction = await this.relayer.send({ to: this.config.usdcAddress, data }, onSent, this.turns)
    } catch (error) {
      if (error instanceof NotSent) {
        const used = USED_REVERT.test(error.message)
        return {
          status: 'failed',
          reason: error.message,
          unsent: true,
          ...(used && { authorizationUsed: true }),
        }
      }
      throw error
    }
    const receipt = await this.chain.waitForReceipt(transaction, this.config.receiptTimeoutMs)
    if (!receipt) return { status: 'unconfirmed', transaction }
    if (receipt.status !== 'success') return { status: 'failed', reason: 'transaction reverted', transaction }
    if (!settles(this.config, payment, receipt)) {
      return { status: 'failed', reason: 'transaction has no matching transfer', transaction }
    }
    return { status: 'settled', transaction, blockNumber: receipt.blockNumber }
  }
}

export class RemoteSettler implements Settler {
  private readonly facilitator: HTTPFacilitatorClient

  constructor(
    private readonly config: FundingConfig,
    private readonly chain: FundingChain,
  ) {
    this.facilitator = new HTTPFacilitatorClient({
      url: config.facilitatorUrl,
      timeoutMs: config.receiptTimeoutMs,
    })
  }

  async verify(payment: Payment, requirements: Requirements): Promise<Verification> {
    const result = await this.facilitator.verify(asPayload(payment), requirementsFor(payment, requirements))
    return result.isValid
      ? { isValid: true }
      : { isValid: false, reason: result.invalidReason ?? 'invalid payment' }
  }

  async settle(
    payment: Payment,
    requirements: Requirements,
    onSent: (transaction: Hex) => Promise<void>,
  ): Promise<Settlement> {
    let result: Awaited<ReturnType<HTTPFacilitatorClient['settle']>>
    try {
      result = await this.facilitator.settle(asPayload(payment), requirementsFor(payment, requirements))
    } catch (error) {
      // The facilitator may have sent it anyway; the claim stays for the reconciler.
      throw new Error(`facilitator settle failed: ${shortMessage(error)}`)
    }
    // No hash is not "not sent": a facilitator whose broadcast reply was lost answers just so while
    // its transaction waits in the pool. Nor is a malformed one, which no node can look up. The
    // claim stays; the reconciler finds out from the chain.
    if (!isHash(result.transaction)) {
      const reason = result.success
        ? 'facilitator answered no transaction hash'
        : 'facilitator refused the payment'
      return { status: 'failed', reason: result.errorReason ?? reason }
    }
    const transaction = result.transaction
    await onSent(transaction)
    const receipt = await this.chain.waitForReceipt(transaction, this.config.receiptTimeoutMs)
    if (!receipt) return { status: 'unconfirmed', transaction }
    // The hash is the facilitator's word: only a receipt that settles this authorization counts.
    if (receipt.status !== 'success' || !settles(this.config, payment, receipt)) {
      return { status: 'failed', reason: result.errorReason ?? 'transaction did not transfer', transaction }
    }
    return { status: 'settled', transaction, blockNumber: receipt.blockNumber }
  }
}

/** Whether a receipt settles the payment's authorization: used by the token, its value paid to payTo. */
function settles(config: FundingConfig, payment: Payment, receipt: Receipt): boolean {
  const a = payment.authorization
  return settlesAuthorization(
    receipt,
    config.usdcAddress,
    { from: a.from, nonce: a.nonce, value: BigInt(a.value) },
    config.payTo,
  )
}
