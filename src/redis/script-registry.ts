// Every script the gateway runs, in one table: each lua/*.lua embedded as text (so the compiled
// binary carries it), the market's assembled from the libraries it includes and its own body
// (concatenation is the include mechanism: one source string per script, still one atomic
// EVALSHA), and all of them as one Redis function library for the native connection
// (functions.ts), which runs the libraries once at load instead of on every call.
import admit from '../../lua/admit.lua' with { type: 'text' }
import capacity from '../../lua/capacity.lua' with { type: 'text' }
import catalogReplace from '../../lua/catalog-replace.lua' with { type: 'text' }
import claimPayment from '../../lua/claim-payment.lua' with { type: 'text' }
import clear from '../../lua/clear.lua' with { type: 'text' }
import confirmPayment from '../../lua/confirm-payment.lua' with { type: 'text' }
import createAccount from '../../lua/create-account.lua' with { type: 'text' }
import credit from '../../lua/credit.lua' with { type: 'text' }
import creditPayment from '../../lua/credit-payment.lua' with { type: 'text' }
import mintKey from '../../lua/mint-key.lua' with { type: 'text' }
import offerPut from '../../lua/offer-put.lua' with { type: 'text' }
import payoutCreate from '../../lua/payout-create.lua' with { type: 'text' }
import payoutLock from '../../lua/payout-lock.lua' with { type: 'text' }
import payoutMove from '../../lua/payout-move.lua' with { type: 'text' }
import quote from '../../lua/quote.lua' with { type: 'text' }
import reap from '../../lua/reap.lua' with { type: 'text' }
import refuse from '../../lua/refuse.lua' with { type: 'text' }
import release from '../../lua/release.lua' with { type: 'text' }
import releasePayment from '../../lua/release-payment.lua' with { type: 'text' }
import renew from '../../lua/renew.lua' with { type: 'text' }
import revokeKey from '../../lua/revoke-key.lua' with { type: 'text' }
import setKeyLimit from '../../lua/set-key-limit.lua' with { type: 'text' }
import supplierSignin from '../../lua/supplier-signin.lua' with { type: 'text' }
import supplierStatus from '../../lua/supplier-status.lua' with { type: 'text' }
import touchKey from '../../lua/touch-key.lua' with { type: 'text' }
import webhookDelete from '../../lua/webhook-delete.lua' with { type: 'text' }
import webhookPut from '../../lua/webhook-put.lua' with { type: 'text' }
import { functionLibrary } from './functions.ts'
import { LIB, MARKET_LIBS, MARKET_PROLOGUE } from './lua-libraries.ts'

// Each script declares how many KEYS and ARGV it takes, as its header block numbers them (a test
// reads the headers); runScript refuses a call that passes another count. A variadic script takes
// its declared ARGV and then more, as its header says (a payout's step and that step's values, the
// catalog's rows).

/** A script that includes no library: its EVAL form is its body. */
const standalone = (lua: string, keys: number, argv: number, variadic = false) => ({
  lua,
  body: lua,
  market: false,
  keys,
  argv,
  variadic,
})

/** A market script: the libraries it calls, the prologue, then its body; one key, the keyspace base. */
const market = (libs: string[], body: string, argv: number, variadic = false) => ({
  lua: [...libs, MARKET_PROLOGUE, body].join('\n'),
  body,
  market: true,
  keys: 1,
  argv,
  variadic,
})
/** An account script that reads the calendar (a key budget's period): lib/numbers, bound, first. */
const withNumbers = (body: string) => [LIB.numbers, 'bind_globals()', body].join('\n')
// Each EVAL form carries only the libraries it calls: every one runs its definitions on every call.
const ending = [LIB.keys, LIB.numbers, LIB.attempts]

export const SCRIPTS = {
  // accounts
  createAccount: standalone(createAccount, 5, 8),
  mintKey: standalone(withNumbers(mintKey), 3, 10),
  revokeKey: standalone(revokeKey, 3, 3),
  setKeyLimit: standalone(withNumbers(setKeyLimit), 3, 6),
  touchKey: standalone(touchKey, 1, 0),
  credit: standalone(credit, 2, 5),
  // catalog
  catalogReplace: standalone(catalogReplace, 2, 2, true),
  // the market: every script takes one key, the keyspace base, from which lib/keys builds the rest
  admit: market(MARKET_LIBS, admit, 16),
  clear: market([...ending, LIB.events], clear, 10),
  release: market(ending, release, 6),
  reap: market([...ending, LIB.reap], reap, 2),
  refuse: market(ending, refuse, 7),
  renew: market([LIB.keys, LIB.numbers], renew, 2),
  offerPut: market([LIB.keys, LIB.numbers, LIB.offers], offerPut, 13),
  capacity: market([LIB.keys, LIB.numbers, LIB.offers], capacity, 1),
  quote: market([LIB.keys, LIB.numbers, LIB.offers, LIB.pick], quote, 3),
  // funding (x402): claim an authorization, release a claim that moved no money, credit, confirm
  claimPayment: standalone(claimPayment, 2, 6),
  releasePayment: standalone(releasePayment, 2, 1),
  creditPayment: standalone(creditPayment, 5, 6),
  confirmPayment: standalone(confirmPayment, 5, 2),
  // suppliers: a verified sign-in becomes a key; the operator suspends or reinstates
  supplierSignin: market([LIB.keys, LIB.numbers], supplierSignin, 9),
  supplierStatus: market([LIB.keys, LIB.numbers, LIB.offers, LIB.events], supplierStatus, 2),
  // payouts: a request moves payable to pending; the sender's lock; each step of a transfer
  payoutCreate: market([LIB.keys, LIB.numbers], payoutCreate, 5),
  payoutLock: market([LIB.keys, LIB.numbers], payoutLock, 4),
  payoutMove: market([LIB.keys, LIB.numbers, LIB.events], payoutMove, 4, true),
  // webhooks: an owner registers or removes an endpoint (the scripts above write its events)
  webhookPut: standalone(webhookPut, 4, 6, true),
  webhookDelete: standalone(webhookDelete, 3, 2),
} as const

export type ScriptName = keyof typeof SCRIPTS

/** Every script as one Redis function library, for the native connection (functions.ts). */
export const LIBRARY = functionLibrary(SCRIPTS)
