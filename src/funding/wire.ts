// The x402 wire format. Version 1 is the contract's: a 402 whose JSON body is
// {x402Version: 1, error, accepts: [PaymentRequirements]}, a retry carrying X-PAYMENT (base64
// JSON), answered with X-PAYMENT-RESPONSE. Version 2 rides beside it for newer clients: the same
// terms in the PAYMENT-REQUIRED header, payments in PAYMENT-SIGNATURE, answers in PAYMENT-RESPONSE.
import type { PaymentRequired, PaymentRequirements } from '@x402/core/types'
import type { Address, Hex } from 'viem'
import { getAddress, isAddress } from 'viem/utils'
import type { FundingConfig } from '../config.ts'
import { ApiError } from '../errors.ts'
import type { MicroUsdc } from '../money/units.ts'
import { CHAIN_IDS } from './network.ts'

export const X_PAYMENT = 'x-payment'
export const PAYMENT_SIGNATURE = 'payment-signature'
export const PAYMENT_REQUIRED = 'PAYMENT-REQUIRED'
export const X_PAYMENT_RESPONSE = 'X-PAYMENT-RESPONSE'
export const PAYMENT_RESPONSE = 'PAYMENT-RESPONSE'

/** What one payment buys: an amount for a resource (the route's URL). */
export interface PaymentTerms {
  amount: MicroUsdc
  resource: string
  description: string
}

/** x402 v1 PaymentRequirements (v1 names networks by name, which the v2 types do not allow). */
export interface RequirementsV1 {
  scheme: string
  network: string
  maxAmountRequired: string
  resource: string
  description: string
  mimeType: string
  outputSchema?: Record<string, unknown>
  payTo: string
  maxTimeoutSeconds: number
  asset: string
  extra: Record<string, unknown>
}

/** The same terms in both versions: v1 for the 402 body, v2 for the PAYMENT-REQUIRED header. */
export interface Requirements {
  v1: RequirementsV1
  v2: PaymentRequirements
}

export function paymentRequirements(config: FundingConfig, terms: PaymentTerms): Requirements {
  const common = {
    scheme: 'exact',
    asset: config.usdcAddress,
    payTo: config.payTo,
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: { name: config.usdcName, version: config.usdcVersion },
  }
  return {
    v1: {
      ...common,
      network: config.network,
      maxAmountRequired: String(terms.amount),
      resource: terms.resource,
      description: terms.description,
      mimeType: 'application/json',
    },
    v2: { ...common, network: `eip155:${CHAIN_IDS[config.network]}`, amount: String(terms.amount) },
  }
}

const base64Json = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64')

/**
 * A refusal's reason as the payer reads it. Reasons can quote a settler's or a facilitator's error
 * text, and with it the operator's RPC or facilitator URL and the signed transaction: each URL is
 * named by its scheme only, a long hex blob cut, the whole kept short.
 */
export function publicReason(reason: string): string {
  const text = reason
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s"'<>\\]*/gi, '$1[redacted]')
    .replace(/0x[0-9a-f]{80,}/gi, '0x[redacted]')
  return text.length > REASON_MAX ? `${text.slice(0, REASON_MAX - 1)}…` : text
}

const REASON_MAX = 300

/**
 * The payment challenge: 402 with the v1 body (`accepts`: sign and pay; no money moved) and the v2
 * header. Thrown like any ApiError; its body is x402's, where `error` is the reason as a string.
 */
export class PaymentChallenge extends ApiError {
  constructor(
    readonly requirements: Requirements,
    terms: PaymentTerms,
    reason: string,
  ) {
    const message = publicReason(reason)
    const v2: PaymentRequired = {
      x402Version: 2,
      error: message,
      resource: { url: terms.resource, description: terms.description, mimeType: 'application/json' },
      accepts: [requirements.v2],
    }
    super(402, 'payment_required', message, {
      headers: { [PAYMENT_REQUIRED]: base64Json(v2), 'cache-control': 'no-store' },
    })
  }

  override body() {
    return { x402Version: 1, error: this.message, accepts: [this.requirements.v1] } as never
  }
}

/** The EIP-3009 authorization a payer signed, as the x402 `exact` scheme carries it. */
export interface Authorization {
  from: Address
  to: Address
  value: string
  validAfter: string
  validBefore: string
  nonce: Hex
}

/** A decoded payment header, either version, checked for shape only (verify.ts checks meaning). */
export interface Payment {
  version: 1 | 2
  scheme: string
  /** v1: the network name (base-sepolia); v2: CAIP-2 (eip155:84532). */
  network: string
  authorization: Authorization
  signature: Hex
  /** v2 only: the requirements the client says it accepted. */
  accepted: PaymentRequirements | undefined
  /** The payload as received, for the facilitator. */
  payload: Record<string, unknown>
}

export class MalformedPayment extends Error {}

const UINT = /^\d{1,78}$/
const HEX32 = /^0x[0-9a-fA-F]{64}$/
const HEX_SIGNATURE = /^0x[0-9a-fA-F]{130,}$/

function decodeBase64Json(header: string): Record<string, unknown> {
  if (header.length > 16_384 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(header))
    throw new MalformedPayment('not base64')
  let value: unknown
  try {
    value = JSON.parse(Buffer.from(header, 'base64').toString('utf8'))
  } catch {
    throw new MalformedPayment('not base64 JSON')
  }
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new MalformedPayment('not a JSON object')
  return value as Record<string, unknown>
}

function authorizationOf(value: unknown): Authorization {
  const a = value as Record<string, unknown> | undefined
  if (!a || typeof a !== 'object') throw new MalformedPayment('no authorization')
  const { from, to, value: amount, validAfter, validBefore, nonce } = a
  if (typeof from !== 'string' || !isAddress(from, { strict: false }))
    throw new MalformedPayment('bad authorization.from')
  if (typeof to !== 'string' || !isAddress(to, { strict: false }))
    throw new MalformedPayment('bad authorization.to')
  for (const [name, field] of Object.entries({ value: amount, validAfter, validBefore })) {
    if (typeof field !== 'string' || !UINT.test(field))
      throw new MalformedPayment(`bad authorization.${name}`)
  }
  if (typeof nonce !== 'string' || !HEX32.test(nonce)) throw new MalformedPayment('bad authorization.nonce')
  return {
    from: getAddress(from),
    to: getAddress(to),
    value: amount as string,
    validAfter: validAfter as string,
    validBefore: validBefore as string,
    nonce: nonce.toLowerCase() as Hex,
  }
}

/** The payment a request carries (PAYMENT-SIGNATURE, else X-PAYMENT), or undefined for none. */
export function decodePayment(headers: Headers): Payment | undefined {
  const header = headers.get(PAYMENT_SIGNATURE) ?? headers.get(X_PAYMENT)
  if (header === null || header.trim() === '') return undefined
  const decoded = decodeBase64Json(header.trim())
  const version = decoded.x402Version
  if (version !== 1 && version !== 2) throw new MalformedPayment('x402Version must be 1 or 2')
  const inner = decoded.payload as Record<string, unknown> | undefined
  if (!inner || typeof inner !== 'object') throw new MalformedPayment('no payload')
  // Only EIP-3009 settles here: a payload that also names another scheme's authorization would be
  // verified as that one (x402 routes on the key) and settled as this one.
  if ('permit2Authorization' in inner) throw new MalformedPayment('payload must be an EIP-3009 authorization')
  const signature = inner.signature
  if (typeof signature !== 'string' || !HEX_SIGNATURE.test(signature))
    throw new MalformedPayment('bad signature')
  const authorization = authorizationOf(inner.authorization)
  // What is verified is exactly what settles: the signature and the authorization, nothing else.
  decoded.payload = { signature, authorization: inner.authorization }
  if (version === 1) {
    if (typeof decoded.scheme !== 'string' || typeof decoded.network !== 'string') {
      throw new MalformedPayment('scheme and network are required')
    }
    return {
      version,
      scheme: decoded.scheme,
      network: decoded.network,
      authorization,
      signature: signature as Hex,
      accepted: undefined,
      payload: decoded,
    }
  }
  const accepted = decoded.accepted as PaymentRequirements | undefined
  if (!accepted || typeof accepted !== 'object' || typeof accepted.network !== 'string') {
    throw new MalformedPayment('accepted is required')
  }
  return {
    version,
    scheme: String(accepted.scheme),
    network: accepted.network,
    authorization,
    signature: signature as Hex,
    accepted,
    payload: decoded,
  }
}

/** X-PAYMENT-RESPONSE (v1) or PAYMENT-RESPONSE (v2): the settlement, base64 JSON. */
export function paymentResponseHeaders(
  payment: Payment,
  settled: { transaction: string; network: string; payer: string },
): Record<string, string> {
  const value = base64Json({ success: true, ...settled })
  return payment.version === 2 ? { [PAYMENT_RESPONSE]: value } : { [X_PAYMENT_RESPONSE]: value }
}
