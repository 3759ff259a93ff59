// The funding scripts of the registry (script-registry.ts): claim an x402 authorization, release a
// claim that moved no money, credit, confirm, and move or take back a payment the chain lost.
import claimPayment from '../../lua/claim-payment.lua' with { type: 'text' }
import confirmPayment from '../../lua/confirm-payment.lua' with { type: 'text' }
import confirmPending from '../../lua/confirm-pending.lua' with { type: 'text' }
import creditPayment from '../../lua/credit-payment.lua' with { type: 'text' }
import creditPending from '../../lua/credit-pending.lua' with { type: 'text' }
import movePayment from '../../lua/move-payment.lua' with { type: 'text' }
import movePending from '../../lua/move-pending.lua' with { type: 'text' }
import notePayment from '../../lua/note-payment.lua' with { type: 'text' }
import releasePayment from '../../lua/release-payment.lua' with { type: 'text' }
import takeBackPayment from '../../lua/take-back-payment.lua' with { type: 'text' }
import takeBackPending from '../../lua/take-back-pending.lua' with { type: 'text' }
import { LIB } from './lua-libraries.ts'
import { market, standalone } from './script-forms.ts'

export const FUNDING_SCRIPTS = {
  // funding (x402): claim an authorization, release a claim that moved no money, credit, confirm
  claimPayment: standalone(claimPayment, 2, [
    'authorizationId',
    'kind',
    'accountId',
    'payer',
    'amount',
    'fromBlock',
    'validBefore',
  ]),
  releasePayment: standalone(releasePayment, 2, [
    'authorizationId',
    'transaction',
    'mark',
    'recordRetentionMs',
  ]),
  notePayment: standalone(notePayment, 1, [], true),
  creditPayment: standalone(
    creditPayment,
    6,
    ['accountId', 'amount', 'paymentId', 'authorizationId', 'blockNumber', 'payer', 'table'],
    false,
    5,
  ),
  confirmPayment: standalone(confirmPayment, 6, ['paymentId', 'accountId'], false, 2),
  creditPending: standalone(creditPending, 2, ['accountId', 'paymentId', 'amount', 'table']),
  confirmPending: market([LIB.keys, LIB.numbers, LIB.events], confirmPending, [
    'accountId',
    'paymentId',
    'amount',
  ]),
  // a pending payment whose transaction the chain lost: moved to the one that used its authorization, or taken back
  movePayment: standalone(movePayment, 6, ['paymentId', 'movedTo', 'blockNumber', 'recordRetentionMs']),
  movePending: standalone(movePending, 1, ['paymentId', 'movedTo']),
  takeBackPayment: standalone(takeBackPayment, 8, ['paymentId', 'accountId', 'recordRetentionMs'], false, 4),
  takeBackPending: market([LIB.keys, LIB.numbers, LIB.events], takeBackPending, [
    'accountId',
    'paymentId',
    'amount',
  ]),
} as const
