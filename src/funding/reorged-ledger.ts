// The Redis side of a pending payment whose transaction the chain no longer holds: moved to the
// transaction that did use its authorization, or taken back once that authorization expired
// unused. On one slot each is one script; held apart, the account's list of its payments (and,
// taking back, its balance) is a step of its own on its slot, idempotent by payment.
import type { Keyspace } from '../redis/keys.ts'
import { PaymentCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'

/** What a move or a take-back did: `nothing_to_do` once the payment is no longer pending. */
export type ReorgedResult =
  | { status: 'done' }
  | { status: 'nothing_to_do' }
  | { status: 'refused'; code: number }

function reorgedResult(code: number): ReorgedResult {
  if (code === PaymentCode.Done) return { status: 'done' }
  if (code === PaymentCode.AlreadyDone) return { status: 'nothing_to_do' }
  return { status: 'refused', code }
}

/**
 * Moves a pending payment to the transaction that did use its authorization (lua/move-payment.lua).
 * Held apart, the account's list follows (lua/move-pending.lua), after the step of any move
 * before this one, which a replica that stopped may have left undone.
 */
export async function movePayment(
  store: Store,
  keys: Keyspace,
  paymentId: string,
  movedTo: string,
  blockNumber: bigint,
  recordRetentionMs: number,
): Promise<ReorgedResult> {
  const [accountId, authorization, movedFrom] = await store.hmget(
    keys.payment(paymentId),
    'accountId',
    'authorization',
    'movedFrom',
  )
  const apart = keys.layout === 'apart'
  if (apart && accountId && movedFrom) await movePending(store, keys, accountId, movedFrom, paymentId)
  const [code] = (await runScript(
    store,
    'movePayment',
    [
      keys.payment(paymentId),
      keys.payment(movedTo),
      keys.authorization(authorization ?? ''),
      keys.paymentsUnconfirmed,
      keys.paymentMovedTo(paymentId),
      keys.transactionPayments(transactionPaymentIdOf(movedTo)),
    ],
    { paymentId, movedTo, blockNumber: blockNumber.toString(), recordRetentionMs },
  )) as [number]
  if (apart && accountId && code === PaymentCode.Done)
    await movePending(store, keys, accountId, paymentId, movedTo)
  return reorgedResult(code)
}

/** The <chainId>:<txHash> a payment id of either shape starts with: its transaction's index of payments. */
const transactionPaymentIdOf = (id: string) => id.split(':').slice(0, 2).join(':')

/** The account's side of a move held apart: idempotent, so any later step may run it again. */
export async function movePending(
  store: Store,
  keys: Keyspace,
  accountId: string,
  paymentId: string,
  movedTo: string,
): Promise<void> {
  await runScript(store, 'movePending', [keys.accountPayments(accountId)], { paymentId, movedTo })
}

/**
 * Takes back a pending payment whose authorization expired unused (lua/take-back-payment.lua),
 * writing funding.reversed for the account's endpoints in the same call. Held apart, the
 * account's balance and its event first (lua/take-back-pending.lua), then the records: a replica
 * that stops between leaves the payment on the watcher's list, whose next pass finishes it.
 */
export async function takeBackPayment(
  store: Store,
  keys: Keyspace,
  paymentId: string,
  accountId: string,
  recordRetentionMs: number,
): Promise<ReorgedResult> {
  const [state, authorization, amount, movedFrom] = await store.hmget(
    keys.payment(paymentId),
    'state',
    'authorization',
    'amount',
    'movedFrom',
  )
  const apart = keys.layout === 'apart'
  const records = [
    keys.payment(paymentId),
    keys.authorization(authorization ?? ''),
    keys.paymentsUnconfirmed,
    keys.paymentReversed(paymentId),
  ]
  if (apart && state === 'pending' && amount) {
    // The records' step refuses a payment its authorization does not name: checked before the balance moves.
    const [credited, by] = await store.hmget(keys.authorization(authorization ?? ''), 'state', 'paymentId')
    if (credited !== 'credited' || by !== paymentId) return reorgedResult(PaymentCode.NoAccount)
    if (movedFrom) await movePending(store, keys, accountId, movedFrom, paymentId)
    const [code] = (await runScript(store, 'takeBackPending', [keys.accountBase(accountId)], {
      accountId,
      paymentId,
      amount,
    })) as [number]
    if (code !== PaymentCode.Done && code !== PaymentCode.AlreadyDone) return reorgedResult(code)
  }
  const [code] = (await runScript(
    store,
    'takeBackPayment',
    apart
      ? records
      : [
          ...records,
          keys.account(accountId),
          keys.webhookHooks(`acct:${accountId}`),
          keys.webhookEvents(`acct:${accountId}`),
          keys.webhookDue(`acct:${accountId}`),
        ],
    { paymentId, accountId, recordRetentionMs },
  )) as [number]
  return reorgedResult(code)
}

/** Moves a payment may have made one after another, at most this many followed (a reorg each). */
const MOVES = 8

/**
 * The payment an id names now: itself while it has a record, else the one it moved to (each move
 * leaves the old id the new one, lua/move-payment.lua), followed move by move; one taken back
 * (lua/take-back-payment.lua) as state `reversed` with its amount and reversedAt (ms); null when none,
 * as for an old id whose move or take-back is past the record retention.
 */
export async function paymentNow(
  store: Store,
  keys: Keyspace,
  paymentId: string,
): Promise<{ id: string; payment: Record<string, string> } | null> {
  let id = paymentId
  for (let move = 0; move <= MOVES; move++) {
    const payment = await store.hgetall(keys.payment(id))
    if (payment.state) return { id, payment }
    const movedTo = await store.get(keys.paymentMovedTo(id))
    if (!movedTo) {
      const reversed = await store.hgetall(keys.paymentReversed(id))
      if (!reversed.amount) return null
      return { id, payment: { state: 'reversed', amount: reversed.amount, reversedAt: reversed.at ?? '' } }
    }
    id = movedTo
  }
  return null
}

/**
 * The ids of the payments a transaction (<chainId>:<txHash>) was credited with or moved to: those
 * its index lists, and first the one a build that knew a payment by its transaction alone
 * recorded (or moved, or took back), when there is one.
 */
export async function paymentsOf(store: Store, keys: Keyspace, transaction: string): Promise<string[]> {
  const ids = (await store.smembers(keys.transactionPayments(transaction))).sort()
  const legacy = await store.exists(
    keys.payment(transaction),
    keys.paymentMovedTo(transaction),
    keys.paymentReversed(transaction),
  )
  return legacy > 0 ? [transaction, ...ids] : ids
}
