// The x402 funding scripts (lua/*-payment.lua): claim an authorization, release a claim that moved
// no money, credit a settled payment to pending, confirm it. Kept beside scripts.ts so the
// funding work adds one line there.
import claimPayment from '../../lua/claim-payment.lua' with { type: 'text' }
import confirmPayment from '../../lua/confirm-payment.lua' with { type: 'text' }
import creditPayment from '../../lua/credit-payment.lua' with { type: 'text' }
import releasePayment from '../../lua/release-payment.lua' with { type: 'text' }
import { standalone } from './standalone-script.ts'

export const FUNDING_SCRIPTS = {
  claimPayment: standalone(claimPayment, 2),
  releasePayment: standalone(releasePayment, 2),
  creditPayment: standalone(creditPayment, 5),
  confirmPayment: standalone(confirmPayment, 3),
} as const
