// What each refusal of admission means to a client: the contract's error, in one place.

import { ApiError, NO_RETRY, retryAfter } from '../errors.ts'
import { formatMicros } from '../money/units.ts'
import { AdmitCode } from '../redis/result-codes.ts'

/** The hint values some refusals carry, as the script returns them. */
export type AdmitRefusal =
  | {
      code: AdmitCode.NoEligibleSupply
      buyerMaxCents: number
      cheapestPostedCents: number
      routableAboveMax: number
    }
  | { code: AdmitCode.InsufficientRoutable; eligibleRoutable: number; maxEligibleOffer: number }
  | { code: AdmitCode.InsufficientBalance; needed: number; confirmed: number; askCents: number }
  | {
      code: AdmitCode.KeyLimit
      /** the key's limit, and what it spent and holds in flight, micro-USDC */
      limit: number
      used: number
      needed: number
      askCents: number
      confirmed: number
      /** when a periodic limit's period ends, ms; null for a lifetime limit */
      resetsAt: number | null
    }
  | {
      code:
        | AdmitCode.UnknownAccount
        | AdmitCode.KeyConcurrency
        | AdmitCode.BuyerConcurrency
        | AdmitCode.PoolEmpty
        | AdmitCode.KeysBusy
        | AdmitCode.SupplyExhausted
        | AdmitCode.DuplicateAttempt
        | AdmitCode.UnknownKey
    }

/** The contract's error for a refusal (KeysBusy becomes key_wait_timeout once the wait is over). */
export function refusalError(refusal: AdmitRefusal): ApiError {
  switch (refusal.code) {
    case AdmitCode.KeyConcurrency:
      return new ApiError(429, 'key_concurrency_limit', 'too many completions in flight on this key', {
        headers: { 'retry-after': '1' },
      })
    case AdmitCode.BuyerConcurrency:
      return new ApiError(429, 'buyer_concurrency_limit', 'too many requests in flight for this wallet', {
        headers: { 'retry-after': '1' },
      })
    case AdmitCode.PoolEmpty:
      return new ApiError(503, 'pool_empty', 'nothing is posted at any price; wait for supply', {
        headers: retryAfter(30),
      })
    case AdmitCode.NoEligibleSupply: {
      const above = formatMicros(refusal.routableAboveMax)
      return new ApiError(
        503,
        'no_eligible_supply',
        `supply exists above your max price of ${refusal.buyerMaxCents} cents; set it to ${refusal.cheapestPostedCents} with PATCH /v1/agent/max-price`,
        {
          extra: {
            buyerMaxCents: refusal.buyerMaxCents,
            cheapestPostedCents: refusal.cheapestPostedCents,
            routableDiemAboveMax: above,
          },
          headers: {
            // Only a higher max price helps: the same request retried is refused the same way.
            ...NO_RETRY,
            'x-svc-error-code': 'no_eligible_supply',
            'x-svc-buyer-max-cents': String(refusal.buyerMaxCents),
            'x-svc-cheapest-posted-cents': String(refusal.cheapestPostedCents),
            'x-svc-routable-diem-above-max': above,
          },
        },
      )
    }
    case AdmitCode.InsufficientRoutable: {
      const eligible = formatMicros(refusal.eligibleRoutable)
      const largest = formatMicros(refusal.maxEligibleOffer)
      return new ApiError(
        503,
        'insufficient_routable_at_price',
        'offers at your price lack the capacity for this request; send a smaller job or retry later',
        {
          extra: { eligibleRoutableDiem: eligible, maxEligibleOfferDiem: largest },
          headers: {
            ...retryAfter(10),
            'x-svc-error-code': 'insufficient_routable_at_price',
            'x-svc-max-eligible-offer-diem': largest,
          },
        },
      )
    }
    case AdmitCode.KeysBusy:
      return new ApiError(503, 'key_wait_timeout', 'every eligible supplier key stayed busy; retry', {
        headers: { ...retryAfter(1), 'x-svc-error-code': 'key_wait_timeout' },
      })
    case AdmitCode.SupplyExhausted:
      return new ApiError(502, 'provider_error', 'no supplier could complete the request; safe to retry')
    case AdmitCode.InsufficientBalance:
      return new ApiError(
        402,
        'insufficient_balance',
        `confirmed balance ${formatMicros(refusal.confirmed)} USDC cannot cover this request's worst case of ${formatMicros(refusal.needed)} USDC; fund via refill`,
        {
          extra: {
            requiredUsdc: formatMicros(refusal.needed),
            confirmedUsdc: formatMicros(refusal.confirmed),
          },
          headers: NO_RETRY,
        },
      )
    case AdmitCode.KeyLimit: {
      const remaining = formatMicros(Math.max(0, refusal.limit - refusal.used))
      const resetsAt = refusal.resetsAt === null ? null : new Date(refusal.resetsAt).toISOString()
      const period = resetsAt === null ? '' : ` in this period, which resets at ${resetsAt}`
      // Never a 402: funding the account would not lift the key's limit.
      return new ApiError(
        403,
        'key_limit_exceeded',
        `this request's worst case of ${formatMicros(refusal.needed)} USDC would take this key past its spending limit of ${formatMicros(refusal.limit)} USDC (${remaining} USDC left${period}); raise it with PATCH /v1/agent/keys/{id} or send a smaller max_tokens`,
        {
          extra: {
            limitUsdc: formatMicros(refusal.limit),
            limitRemainingUsdc: remaining,
            requiredUsdc: formatMicros(refusal.needed),
            ...(resetsAt === null ? {} : { limitResetsAt: resetsAt }),
          },
          headers: NO_RETRY,
        },
      )
    }
    case AdmitCode.UnknownAccount:
      return new ApiError(401, 'invalid_api_key', 'the account of this key no longer exists')
    case AdmitCode.UnknownKey:
      return new ApiError(401, 'invalid_api_key', 'invalid API key', {
        headers: { 'www-authenticate': 'Bearer' },
      })
    case AdmitCode.DuplicateAttempt:
      return new ApiError(500, 'internal_error', 'internal error; safe to retry')
  }
}
