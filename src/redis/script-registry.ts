// Every script the gateway runs, in one table (the funding scripts from funding-scripts.ts): each
// lua/*.lua embedded as text (so the compiled binary carries it), the market's assembled from the
// libraries it includes and its own body (concatenation is the include mechanism: one source string
// per script, still one atomic EVALSHA), and all of them as one Redis function library for the
// native connection (functions.ts), which runs the libraries once at load instead of on every call.
import admit from '../../lua/admit.lua' with { type: 'text' }
import capacity from '../../lua/capacity.lua' with { type: 'text' }
import catalogReplace from '../../lua/catalog-replace.lua' with { type: 'text' }
import clear from '../../lua/clear.lua' with { type: 'text' }
import createAccount from '../../lua/create-account.lua' with { type: 'text' }
import credit from '../../lua/credit.lua' with { type: 'text' }
import due from '../../lua/due.lua' with { type: 'text' }
import foldSums from '../../lua/fold-sums.lua' with { type: 'text' }
import hold from '../../lua/hold.lua' with { type: 'text' }
import indexAccount from '../../lua/index-account.lua' with { type: 'text' }
import indexKey from '../../lua/index-key.lua' with { type: 'text' }
import indexOffer from '../../lua/index-offer.lua' with { type: 'text' }
import mintKey from '../../lua/mint-key.lua' with { type: 'text' }
import offerPut from '../../lua/offer-put.lua' with { type: 'text' }
import payoutCreate from '../../lua/payout-create.lua' with { type: 'text' }
import payoutLock from '../../lua/payout-lock.lua' with { type: 'text' }
import payoutMove from '../../lua/payout-move.lua' with { type: 'text' }
import post from '../../lua/post.lua' with { type: 'text' }
import quote from '../../lua/quote.lua' with { type: 'text' }
import reap from '../../lua/reap.lua' with { type: 'text' }
import reapHold from '../../lua/reap-hold.lua' with { type: 'text' }
import refuse from '../../lua/refuse.lua' with { type: 'text' }
import release from '../../lua/release.lua' with { type: 'text' }
import renameKey from '../../lua/rename-key.lua' with { type: 'text' }
import renew from '../../lua/renew.lua' with { type: 'text' }
import reserve from '../../lua/reserve.lua' with { type: 'text' }
import revokeKey from '../../lua/revoke-key.lua' with { type: 'text' }
import setKeyLimit from '../../lua/set-key-limit.lua' with { type: 'text' }
import supplierSignin from '../../lua/supplier-signin.lua' with { type: 'text' }
import supplierStatus from '../../lua/supplier-status.lua' with { type: 'text' }
import touchKey from '../../lua/touch-key.lua' with { type: 'text' }
import voidReservation from '../../lua/void.lua' with { type: 'text' }
import webhookDelete from '../../lua/webhook-delete.lua' with { type: 'text' }
import webhookForget from '../../lua/webhook-forget.lua' with { type: 'text' }
import webhookPut from '../../lua/webhook-put.lua' with { type: 'text' }
import webhookState from '../../lua/webhook-state.lua' with { type: 'text' }
import { functionLibrary } from './functions.ts'
import { FUNDING_SCRIPTS } from './funding-scripts.ts'
import { LIB, MARKET_LIBS } from './lua-libraries.ts'
import { market, standalone } from './script-forms.ts'

/** An account script that reads the calendar (a key budget's period): lib/numbers, bound, first. */
const withNumbers = (body: string) => [LIB.numbers, 'bind_globals()', body].join('\n')
// Each EVAL form carries only the libraries it calls: every one runs its definitions on every call.
const ending = [LIB.keys, LIB.numbers, LIB.ladder, LIB.record, LIB.attempts]

export const SCRIPTS = {
  // accounts
  createAccount: standalone(
    createAccount,
    5,
    [
      'accountId',
      'wallet',
      'walletLower',
      'maxPriceCents',
      'keyId',
      'keyDigest',
      'keyName',
      'keyPrefix',
      'table',
    ],
    false,
    2,
  ),
  indexAccount: standalone(indexAccount, 2, ['accountId', 'walletLower']),
  indexKey: standalone(indexKey, 1, ['keyId', 'owner', 'ownerId', 'keyName', 'keyPrefix']),
  mintKey: standalone(
    withNumbers(mintKey),
    3,
    [
      'accountId',
      'keyId',
      'keyDigest',
      'keyName',
      'keyPrefix',
      'maxKeys',
      'limit',
      'owner',
      'callerKeyId',
      'limitReset',
      'table',
    ],
    false,
    2,
  ),
  revokeKey: standalone(revokeKey, 3, ['keyId', 'keyDigest', 'callerKeyId'], false, 2),
  setKeyLimit: standalone(
    withNumbers(setKeyLimit),
    3,
    ['keyId', 'keyDigest', 'limit', 'name', 'callerKeyId', 'limitReset', 'now'],
    false,
    2,
  ),
  touchKey: standalone(touchKey, 1, []),
  renameKey: standalone(renameKey, 1, ['keyName']),
  credit: standalone(credit, 3, [
    'accountId',
    'amount',
    'maxAmount',
    'note',
    'actor',
    'table',
    'idempotencyDigest',
  ]),
  // catalog
  catalogReplace: standalone(catalogReplace, 2, ['syncedAt', 'sourceUrl', 'ticket'], true),
  // the market: every script takes one key, the keyspace base, from which lib/keys builds the rest
  admit: market(MARKET_LIBS, admit, [
    'attemptId',
    'accountId',
    'apiKeyId',
    'holdDiem',
    'keyCap',
    'accountCap',
    'leaseMs',
    'tried',
    'defaultMaxPriceCents',
    'model',
    'requestId',
    'capGroup',
    'capGroupCap',
    'apiKeyDigest',
    'recordRetentionMs',
    'now',
  ]),
  clear: market(
    [...ending, LIB.events],
    clear,
    [
      'attemptId',
      'burn',
      'feeBps',
      'upstreamBalance',
      'inputTokens',
      'outputTokens',
      'estimated',
      'outcome',
      'recordRetentionMs',
      'upstreamCost',
      'offerApart',
      'upstreamGen',
      'boundedBurn',
    ],
    true,
  ),
  release: market(ending, release, [
    'attemptId',
    'errorCode',
    'cooldownMs',
    'upstreamBalance',
    'final',
    'recordRetentionMs',
    'offerApart',
    'upstreamGen',
    'endReaped',
  ]),
  reap: market([...ending, LIB.reap], reap, ['limit', 'recordRetentionMs', 'tierless']),
  // The two sides of a request held apart, each on its own slot (a Cluster): the offer's reserve,
  // post and void, the account's hold and reapHold (its clear and release are clear's and release's
  // with offerApart).
  reserve: market(
    [LIB.keys, LIB.numbers, LIB.ladder, LIB.offers, LIB.record, LIB.attempts, LIB.posts],
    reserve,
    ['attemptId', 'offerId', 'holdDiem', 'maxCents', 'leaseMs', 'accountId', 'now', 'recordRetentionMs'],
    true,
  ),
  hold: market([LIB.keys, LIB.numbers, LIB.record, LIB.holds], hold, [
    'attemptId',
    'accountId',
    'apiKeyId',
    'apiKeyDigest',
    'holdDiem',
    'keyCap',
    'accountCap',
    'capGroup',
    'capGroupCap',
    'offerId',
    'askCents',
    'defaultMaxPriceCents',
    'model',
    'requestId',
    'tried',
    'now',
  ]),
  void: market([...ending], voidReservation, [
    'attemptId',
    'cooldownMs',
    'upstreamBalance',
    'recordRetentionMs',
    'watchMs',
    'balanceDay',
    'upstreamGen',
  ]),
  post: market([...ending, LIB.posts], post, ['recordRetentionMs', 'offerId'], true),
  reapHold: market([...ending], reapHold, ['attemptId', 'recordRetentionMs', 'offerId']),
  refuse: market(ending, refuse, [
    'attemptId',
    'accountId',
    'apiKeyId',
    'requestId',
    'model',
    'errorCode',
    'recordRetentionMs',
  ]),
  renew: market([LIB.keys, LIB.numbers], renew, ['attemptId', 'leaseMs']),
  due: market([LIB.keys, LIB.numbers], due, ['limit']),
  offerPut: market([LIB.keys, LIB.numbers, LIB.ladder, LIB.offers], offerPut, [
    'mode',
    'offerId',
    'upstreamBaseUrl',
    'upstreamKeyEnc',
    'askCents',
    'capacity',
    'maxInFlight',
    'status',
    'supplier',
    'supplierId',
    'upstreamKeyDigest',
    'maxStanding',
    'maxEver',
    'seq',
    'apart',
    'upstreamBalance',
    'balanceSince',
  ]),
  indexOffer: market([LIB.keys, LIB.numbers, LIB.ladder], indexOffer, [
    'mode',
    'offerId',
    'supplierId',
    'upstreamKeyDigest',
    'status',
    'score',
    'maxStanding',
    'maxEver',
  ]),
  capacity: market([LIB.keys, LIB.numbers, LIB.ladder, LIB.offers], capacity, ['maxPriceCents']),
  quote: market([LIB.keys, LIB.numbers, LIB.ladder, LIB.offers, LIB.pick], quote, [
    'accountId',
    'holdDiem',
    'defaultMaxPriceCents',
  ]),
  ...FUNDING_SCRIPTS,
  // suppliers: a verified sign-in becomes a key; the operator suspends or reinstates
  supplierSignin: market([LIB.keys, LIB.numbers], supplierSignin, [
    'nonce',
    'wallet',
    'walletLower',
    'supplierId',
    'keyId',
    'keyDigest',
    'keyPrefix',
    'keyName',
    'maxKeys',
  ]),
  supplierStatus: market([LIB.keys, LIB.numbers, LIB.ladder, LIB.offers, LIB.events], supplierStatus, [
    'supplierId',
    'status',
  ]),
  // payouts: a request moves payable to pending; the sender's lock; each step of a transfer
  payoutCreate: market([LIB.keys, LIB.numbers], payoutCreate, [
    'supplierId',
    'payoutId',
    'amount',
    'idempotencyDigest',
    'minimum',
    'earned',
  ]),
  payoutLock: market([LIB.keys, LIB.numbers], payoutLock, ['action', 'wallet', 'token', 'ttlMs']),
  payoutMove: market(
    [LIB.keys, LIB.numbers, LIB.events],
    payoutMove,
    ['payoutId', 'step', 'wallet', 'token'],
    true,
  ),
  // webhooks: an owner registers, removes, disables or enables an endpoint (the scripts above
  // write its events)
  webhookPut: standalone(
    webhookPut,
    5,
    ['endpointId', 'endpoint', 'maxEndpoints', 'owner', 'balanceThreshold', 'group'],
    true,
    4,
  ),
  webhookDelete: standalone(webhookDelete, 6, ['endpointId', 'owner'], false, 5),
  webhookState: standalone(webhookState, 1, ['endpointId', 'expected', 'endpoint']),
  // a replica's sweep drops the consumers stopped replicas left in an owner's delivery group
  webhookForget: standalone(webhookForget, 1, ['group', 'idleMs', 'keep']),
  // usage and earnings: a Stream's new entries folded into its sums (src/records/stream-sums.ts)
  foldSums: standalone(
    foldSums,
    1,
    ['expected', 'gen', 'cursor', 'reset', 'deleted', 'ttlMs', 'start'],
    true,
  ),
} as const

export type ScriptName = keyof typeof SCRIPTS

/** Every script as one Redis function library, for a single server (the native connection). */
export const LIBRARY = functionLibrary(SCRIPTS, { guarded: false })
/** The same with the slot guard first in every function, for a Cluster's masters. */
export const CLUSTER_LIBRARY = functionLibrary(SCRIPTS, { guarded: true })
/** Both of this build's libraries: what `svc-gateway functions prune` keeps. */
export const BUILD_LIBRARIES: readonly string[] = [LIBRARY.name, CLUSTER_LIBRARY.name]
