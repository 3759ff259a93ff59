// What a payment's authorization seen before is answered: it never settles again. Credited or
// still in flight, a 409 (money moved or may move); taken back, released by the reconciler, or
// canceled by its payer, a challenge that says no money moved.
import { ApiError } from '../errors.ts'
import type { InFlightPayment, ReleasedAs } from './ledger.ts'
import type { PaymentChallenge } from './wire.ts'

// Why a payment whose transaction a reorg took out, its authorization expired unused, is challenged again.
export const TAKEN_BACK =
  'payment verification failed: the authorization expired unused after its transaction left the chain; no money moved, sign a new authorization'

// The payer canceled the authorization on chain (EIP-3009 cancelAuthorization) before it settled.
export const CANCELED =
  'the authorization was canceled by the payer; no money moved, sign a new authorization'

// Why an authorization the reconciler released, `expired` unused or `canceled` by the payer, is
// challenged again: no block can use it, whatever a receipt of a lost fork said.
export const RELEASED: Record<ReleasedAs, string> = {
  expired:
    'payment verification failed: the authorization expired unused; no money moved, sign a new authorization',
  canceled: `payment verification failed: ${CANCELED}`,
}

/** 409: money moved, the request did not finish. Never carries `accepts`. */
export function moneyMoved(code: string, message: string, extra: Record<string, unknown>): ApiError {
  return new ApiError(409, code, message, { extra })
}

export function inFlight(transaction: string | undefined): ApiError {
  return moneyMoved('payment_in_flight', 'this payment is already being settled', {
    reconciling: true,
    transaction: transaction || undefined,
  })
}

/**
 * Throws the answer to a replay of the authorization `record` is of; returns when none was seen.
 * One still in flight that its payer canceled is challenged as its own request was, though the
 * reconciler keeps the claim until the cancellation is confirmed: that answer said no money moved
 * already, and a transfer a reorg brought back would still be credited from the claim.
 */
export function refuseReplay(
  record: InFlightPayment | null,
  refuse: (reason: string) => PaymentChallenge,
): void {
  if (!record) return
  if (record.state === 'taken back') throw refuse(TAKEN_BACK)
  if (record.state === 'expired' || record.state === 'canceled') throw refuse(RELEASED[record.state])
  if (record.state === 'credited') {
    throw moneyMoved(
      'payment_already_credited',
      'this payment was already settled and credited; it is not credited again',
      { credited: true, reconciling: false, transaction: record.paymentId?.split(':')[1] },
    )
  }
  if (record.canceledTx) throw refuse(RELEASED.canceled)
  throw inFlight(record.tx)
}
