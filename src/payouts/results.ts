// The contract errors of payouts: what each refusal of lua/payout-create.lua means to a client.
import { ApiError, NO_RETRY } from '../errors.ts'
import { formatMicros } from '../money/units.ts'

export const payoutsUnavailable = () =>
  new ApiError(503, 'payouts_unavailable', 'payouts are not enabled on this gateway', {
    headers: NO_RETRY,
  })

export const payoutNotFound = (id: string) =>
  new ApiError(404, 'payout_not_found', `payout '${id}' not found`)

export const payoutSuspended = () =>
  new ApiError(403, 'supplier_suspended', 'the supplier is suspended: payouts are refused', {
    headers: NO_RETRY,
  })

export const payoutBelowMinimum = (minimum: number) =>
  new ApiError(400, 'payout_below_minimum', `a payout is at least ${formatMicros(minimum)} USDC`, {
    extra: { minimumUsdc: formatMicros(minimum) },
  })

export const payoutAbovePayable = (payable: number) =>
  new ApiError(
    409,
    'payout_exceeds_payable',
    `the amount is more than the ${formatMicros(payable)} USDC payable`,
    { extra: { payableUsdc: formatMicros(payable) }, headers: NO_RETRY },
  )

export const idempotencyKeyReused = (payoutId: string) =>
  new ApiError(
    409,
    'idempotency_key_reused',
    'this Idempotency-Key was used for a payout of another amount',
    { extra: { payoutId }, headers: NO_RETRY },
  )
