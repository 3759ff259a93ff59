// A paid request's money in two steps, one per owner, for a market whose accounts and offers live
// on slots of their own (a Redis Cluster, where one script reaches one slot), in the manner of
// TigerBeetle's pending, post and void transfers:
//   admission  reserve the offer's capacity (lua/reserve.lua), then hold the account's worst case
//              (lua/hold.lua); a refused hold voids the reservation (lua/void.lua);
//   clear      charge the account (lua/clear.lua, offerApart), then post the reservation with what
//              was billed (lua/post.lua), or queue the post for the offer's next reservation from
//              this replica to carry (post-queue.ts);
//   failure    release the account's hold (lua/release.lua, offerApart), then void the reservation.
// Every step is idempotent by attempt id, and the lease is the reservation's: a replica that dies
// between two steps leaves a reservation whose lease runs out, and reapOffer finishes it from the
// account's side (lua/reap-hold.lua): what was cleared is posted, anything else voided. On a single
// Redis admit and clear hold both sides in one call instead (admission.ts, clearing.ts).
import type { MicroDiem, MicroUsdc } from '../money/units.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import { isRedisUnavailable } from '../redis/connection.ts'
import { accountShard, type Keyspace, keyspace, ownerPrefix } from '../redis/keys.ts'
import { AdmitCode } from '../redis/result-codes.ts'
import { replyNumber as n, type ScriptReply as Reply, runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { type Admission, type AdmitRequest, refusalOf } from './admission.ts'
import { type Clearing, type ClearRequest, clear, type ReleaseRequest, releaseAttempt } from './clearing.ts'
import { type Billed, type PostQueue, postValues } from './post-queue.ts'
import type { AdmitRefusal } from './refusal-errors.ts'

/** The keyspaces of a market's owners: each account's shard and each offer on a hash tag of its own. */
export interface Owners {
  account(accountId: string): Keyspace
  offer(offerId: string): Keyspace
}

/**
 * Accounts spread over 4,096 shards by their id's hash (an account's keys, holds and attempts sit
 * under its shard's tag); each offer under its own (ownerPrefix in src/redis/keys.ts).
 */
export function ownerKeyspaces(prefix: string): Owners {
  return {
    account: (accountId) => keyspace(ownerPrefix(prefix, `a.${accountShard(accountId)}`)),
    offer: (offerId) => keyspace(ownerPrefix(prefix, `o.${offerId}`)),
  }
}

/**
 * The offer's slot refused the reservation for now (its master failing over, the slot being moved):
 * the account was not touched, so another offer may take the request. A reservation the call may
 * still have written is voided by the reaper when its lease runs out (the account holds nothing).
 */
export class OfferUnavailable extends Error {
  constructor(
    readonly offerId: string,
    override readonly cause: unknown,
  ) {
    super(`offer ${offerId} unavailable: ${(cause as Error)?.message ?? String(cause)}`)
  }
}

/** admit's request, but for one offer the caller chose, with the key's owner already resolved. */
export interface AdmitApartRequest extends Omit<AdmitRequest, 'apiKeyDigest'> {
  /** Checked against the account's active keys, so a key revoked since it was resolved is refused. */
  apiKeyDigest?: string
  /** The offer chosen from the caller's view of the ladder, and the buyer's max as it knows it. */
  offerId: string
  maxCents: number
}

/** An offer's load as a reservation's reply gives it: its in-flight count and its cap. */
export interface OfferLoad {
  inflight: number
  maxInFlight: number
}

/** What a reservation's reply said of its offer (each part where the reply gave it). */
export interface OfferReply {
  /** Its ask as the reservation found it. */
  ask?: number
  /** What it could hold for new requests, micro-DIEM, after this reservation. */
  routable?: number
  /** Its load with this reservation, or at its cap (refused). */
  load?: OfferLoad
  /**
   * Refused without a load: paused, its supplier suspended (until: null), or cooling down until
   * `until` (ms).
   */
  unavailable?: { until: number | null }
}

/** Told what the offer's reservation did, for the caller's view of the ladder (ladder-view.ts). */
export interface ReservationSeen {
  /**
   * The offer's reply, taken or refused by the offer (lua/reserve.lua); not called when it refused
   * as gone or a duplicate, or no reply came.
   */
  replied(reply: OfferReply): void
  /** The reservation was voided after its reply (the account refused the hold). */
  voided(): void
}

/** What a reservation's reply says of its offer, by its code (lua/reserve.lua's replies). */
function offerReply(reply: Reply): OfferReply | null {
  const at = (i: number) => (reply[i] === undefined || reply[i] === '' ? undefined : n(reply[i]))
  switch (n(reply[0])) {
    case AdmitCode.Admitted:
      return { ask: at(1), load: { inflight: n(reply[6]), maxInFlight: n(reply[7]) }, routable: at(8) }
    case AdmitCode.NoEligibleSupply:
      return { ask: at(2) }
    case AdmitCode.InsufficientRoutable:
      return { routable: at(1), ask: at(3) }
    case AdmitCode.KeysBusy:
      if (reply.length < 3) return { unavailable: { until: at(1) ?? null } }
      return { load: { inflight: n(reply[1]), maxInFlight: n(reply[2]) }, routable: at(3), ask: at(4) }
    default:
      return null
  }
}

/**
 * posts: this replica's queue, whose posts for the offer the reservation carries; seen: told what
 * the offer's reply said of it.
 */
export async function admitApart(
  store: Store,
  owners: Owners,
  req: AdmitApartRequest,
  posts?: PostQueue,
  seen?: ReservationSeen,
): Promise<Admission | AdmitRefusal> {
  const offer = owners.offer(req.offerId)
  const carried = posts?.take(req.offerId) ?? null
  const reserved = (await runScript(
    store,
    'reserve',
    [offer.base],
    {
      attemptId: req.attemptId,
      offerId: req.offerId,
      holdDiem: req.holdDiem,
      maxCents: req.maxCents,
      leaseMs: req.leaseMs,
      accountId: req.accountId,
      now: req.now ?? '',
      recordRetentionMs: carried?.recordRetentionMs ?? req.recordRetentionMs ?? DEFAULT_RECORD_RETENTION_MS,
    },
    carried?.values,
  ).catch((error) => {
    if (carried) posts!.putBack(req.offerId, carried)
    throw isRedisUnavailable(error) ? new OfferUnavailable(req.offerId, error) : error
  })) as Reply
  const said = seen && offerReply(reserved)
  if (said) seen.replied(said)
  if (n(reserved[0]) !== AdmitCode.Admitted) return refusalOf(reserved)
  const held = (await runScript(store, 'hold', [owners.account(req.accountId).base], {
    attemptId: req.attemptId,
    accountId: req.accountId,
    apiKeyId: req.apiKeyId,
    apiKeyDigest: req.apiKeyDigest ?? '',
    holdDiem: req.holdDiem,
    keyCap: req.keyCap,
    accountCap: req.accountCap,
    capGroup: req.capGroup?.name ?? '',
    capGroupCap: req.capGroup?.cap ?? 0,
    offerId: req.offerId,
    askCents: n(reserved[1]),
    defaultMaxPriceCents: req.defaultMaxPriceCents,
    model: req.model,
    requestId: req.requestId,
    tried: req.tried.join(','),
    now: req.now ?? '',
  })) as Reply
  const code = n(held[0])
  if (code !== AdmitCode.Admitted) {
    await voidReservation(store, owners, req.attemptId, req.offerId, 0, null, req.recordRetentionMs)
    seen?.voided()
    if (code === AdmitCode.UnknownKey) return { code }
    const who = { accountId: String(held[held.length - 2]), apiKeyId: String(held[held.length - 1]) }
    return Object.assign(refusalOf(held.slice(0, -2)), { who })
  }
  return {
    code: AdmitCode.Admitted,
    attemptId: req.attemptId,
    accountId: req.accountId,
    apiKeyId: req.apiKeyId,
    offerId: req.offerId,
    askCents: n(reserved[1]),
    holdUsdc: n(held[1]) as MicroUsdc,
    holdDiem: req.holdDiem,
    leaseDeadline: n(reserved[2]),
    confirmedAfter: n(held[2]) as MicroUsdc,
    upstreamBaseUrl: String(reserved[3]),
    upstreamKeyEnc: String(reserved[4]),
    upstreamBalance: reserved[5] === '' || reserved[5] === undefined ? null : (n(reserved[5]) as MicroDiem),
    upstreamGen: n(reserved[9]),
    model: req.model,
    requestId: req.requestId,
  }
}

/** Whose attempt it is: the account charged, the offer posted, the model on the supplier's fill. */
export interface AttemptOwners {
  accountId: string
  offerId: string
  model: string
}

/** posts: where the offer's side waits for a reservation to carry it; without, it is posted now. */
export async function clearApart(
  store: Store,
  owners: Owners,
  who: AttemptOwners,
  req: ClearRequest,
  posts?: PostQueue,
): Promise<Clearing> {
  const clearing = await clear(store, owners.account(who.accountId), { ...req, offerApart: true })
  if (posts) {
    const values = postValues(
      req.attemptId,
      who.model,
      clearing,
      req.upstreamBalanceAfter ?? null,
      req.upstreamGen,
    )
    posts.add(who.offerId, values, req.recordRetentionMs ?? DEFAULT_RECORD_RETENTION_MS)
    return clearing
  }
  try {
    await post(
      store,
      owners,
      req.attemptId,
      who,
      clearing,
      req.upstreamBalanceAfter,
      req.recordRetentionMs,
      req.upstreamGen,
    )
  } catch (error) {
    // The account is charged: that is the request's outcome, and its client is told it. A post the
    // offer's slot refuses for now (its master failing over, the slot being moved) is made by
    // reapOffer once the reservation's lease runs out, with what the account's attempt billed.
    if (!isRedisUnavailable(error)) throw error
  }
  return clearing
}

/** Returns true when this call released the account's hold; the reservation is voided either way. */
export async function releaseApart(
  store: Store,
  owners: Owners,
  who: AttemptOwners,
  req: ReleaseRequest,
): Promise<boolean> {
  const { released, balanceDay } = await releaseAttempt(store, owners.account(who.accountId), {
    ...req,
    offerApart: true,
  })
  // The balance as the account's side found it: from a request admitted on an earlier UTC day, not known.
  const balance = balanceDay === null ? null : req.upstreamBalance
  await voidReservation(
    store,
    owners,
    req.attemptId,
    who.offerId,
    req.cooldownMs,
    balance,
    req.recordRetentionMs,
    0,
    balanceDay,
    req.upstreamGen,
  )
  return released
}

/**
 * How long the reaper looks out for a late clear after voiding a reservation (its replica's
 * renewals push it on): a replica that stopped renewing may still be served and charge the account,
 * and once voided, the reservation has no lease to bring the reaper back should that post be lost.
 */
export const LATE_CLEAR_WATCH_MS = 5 * 60_000

/**
 * Finishes the offer's reservations whose lease ran out (at most `limit`): each attempt the
 * account still holds is reaped and its reservation voided; one cleared on the account's side but
 * never posted (its replica died between the two steps) is posted with what was billed. A voided
 * one is looked at once more after `watchMs`: posted if a late clear charged its account since,
 * else let go. Returns how many it finished.
 */
export async function reapOffer(
  store: Store,
  owners: Owners,
  offerId: string,
  limit = 100,
  recordRetentionMs = DEFAULT_RECORD_RETENTION_MS,
  watchMs = LATE_CLEAR_WATCH_MS,
): Promise<number> {
  const offer = owners.offer(offerId)
  // Read on the offer's own slot, by the clock of the master that wrote the deadlines.
  const due = (await runScript(store, 'due', [offer.base], { limit })) as string[]
  for (const attemptId of due) {
    const accountId = await store.hget(offer.reservation(attemptId), 'accountId')
    const ended = accountId
      ? ((await runScript(store, 'reapHold', [owners.account(accountId).base], {
          attemptId,
          recordRetentionMs,
          offerId,
        })) as Reply)
      : [0]
    if (n(ended[0]) === 2) {
      const billed = {
        burn: n(ended[1]) as MicroDiem,
        charged: (n(ended[2]) + n(ended[3])) as MicroUsdc,
        fee: n(ended[3]) as MicroUsdc,
        disputed: n(ended[4]) as MicroDiem,
        askCents: n(ended[6]),
        ...(ended[7] ? { clearedAt: n(ended[7]) } : {}),
      }
      const who = { accountId: accountId!, offerId, model: String(ended[5]) }
      await post(store, owners, attemptId, who, billed, null, recordRetentionMs)
    } else {
      await voidReservation(store, owners, attemptId, offerId, 0, null, recordRetentionMs, watchMs)
    }
  }
  return due.length
}

async function post(
  store: Store,
  owners: Owners,
  attemptId: string,
  who: AttemptOwners,
  billed: Billed,
  upstreamBalance: MicroDiem | null,
  recordRetentionMs = DEFAULT_RECORD_RETENTION_MS,
  upstreamGen?: number,
): Promise<void> {
  await runScript(
    store,
    'post',
    [owners.offer(who.offerId).base],
    { recordRetentionMs, offerId: who.offerId },
    postValues(attemptId, who.model, billed, upstreamBalance, upstreamGen),
  )
}

async function voidReservation(
  store: Store,
  owners: Owners,
  attemptId: string,
  offerId: string,
  cooldownMs: number,
  upstreamBalance: MicroDiem | null,
  recordRetentionMs = DEFAULT_RECORD_RETENTION_MS,
  watchMs = 0,
  /** The UTC day the balance holds on (lua/release.lua's answer); without one it is not recorded. */
  balanceDay: number | null = null,
  /** The upstream generation the reservation answered: without it the balance is not recorded. */
  upstreamGen?: number,
): Promise<void> {
  await runScript(store, 'void', [owners.offer(offerId).base], {
    attemptId,
    cooldownMs,
    upstreamBalance: upstreamBalance ?? '',
    recordRetentionMs,
    watchMs,
    balanceDay: balanceDay ?? '',
    upstreamGen: upstreamGen ?? '',
  })
}
