// What a funding payment buys: the amount a route accepts (1 to 1,000 USDC) and the terms its 402
// challenge states, shared by signup, refill and the browser top-up.

import { ApiError } from '../../errors.ts'
import type { PaymentTerms } from '../../funding/wire.ts'
import { formatMicros, MICROS_PER_UNIT, type MicroUsdc, parseMicros } from '../../money/units.ts'

export const MIN_FUNDING = (1 * MICROS_PER_UNIT) as MicroUsdc
export const MAX_FUNDING = (1000 * MICROS_PER_UNIT) as MicroUsdc

/** A funding amount: a decimal string of 1 to 1,000 USDC with at most 6 decimals, else 400. */
export function fundingAmount(text: string): MicroUsdc {
  const micros = /^\d{1,4}(\.\d{1,6})?$/.test(text) ? parseMicros(text) : null
  if (micros === null || micros < MIN_FUNDING || micros > MAX_FUNDING) {
    throw new ApiError(
      400,
      'invalid_amount',
      'amountUsdc must be a decimal string from 1 to 1000 USDC with at most 6 decimals (e.g. "20.000000")',
    )
  }
  return micros as MicroUsdc
}

export function termsFor(request: Request, amount: MicroUsdc, what: string): PaymentTerms {
  const url = new URL(request.url)
  return {
    amount,
    resource: `${url.origin}${url.pathname}`,
    description: `${what}: ${formatMicros(amount)} USDC of prepaid inference credit`,
  }
}
