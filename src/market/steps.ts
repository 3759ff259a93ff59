// The steps of one paid attempt against the store, whatever the market's layout: admit, then clear
// or release, its lease renewed while the supplier call runs and reaped if its replica dies. One
// slot (a single Redis, or every key under the prefix's tag): each step is one script on that slot
// (admission.ts, clearing.ts, leases.ts). Held apart (accounts and offers under tags of their own,
// so that a Cluster spreads them over its masters): each step is a two-phase pair, one script per
// owner (two-phase.ts), the offer chosen from this replica's view of the ladder (ladder-view.ts).
// The request path calls these and nothing below them, so it reads the same in both.

import { LastUsedThrottle } from '../accounts/last-used.ts'
import type { MicroDiem } from '../money/units.ts'
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import type { Keyspace } from '../redis/keys.ts'
import { AdmitCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { type Admission, type AdmitRequest, admit, quote, whoseRequest } from './admission.ts'
import { admitCheapest, pickFromView } from './admit-from-view.ts'
import {
  type AdmittedAs,
  type Clearing,
  type ClearRequest,
  clear,
  type ReleaseRequest,
  release,
} from './clearing.ts'
import { type KeyOwner, KeyOwners } from './key-owners.ts'
import { LadderView } from './ladder-view.ts'
import { reapExpired, renewLease } from './leases.ts'
import { OfferIndex } from './offer-index.ts'
import { POST_WITHIN_MS, PostQueue } from './post-queue.ts'
import type { AdmitRefusal } from './refusal-errors.ts'
import { seenWithinMs } from './replicas.ts'
import { clearApart, type Owners, ownerKeyspaces, reapOffer, releaseApart } from './two-phase.ts'

/**
 * Whose attempt it is: what a step after admission needs to find both of its sides. An Admission
 * is one, and carries the rest of what admit answered: with it, a clear that finds the admission
 * lost (a failover) clears it late all the same.
 */
export interface AttemptRef extends Partial<AdmittedAs> {
  attemptId: string
  accountId: string
  offerId: string
  /** The model served (on the supplier's fill). */
  model: string
  /** The offer's upstream generation admit answered (Admission's); absent: its balance is not recorded. */
  upstreamGen?: number
}

/** A clear as the request path asks it: the attempt's ids and admission come from its ref. */
export type ClearArgs = Omit<ClearRequest, 'attemptId' | 'offerApart' | 'admission' | 'upstreamGen'>

/** A release as the request path asks it: the attempt's ids come from its ref. */
export type ReleaseArgs = Omit<ReleaseRequest, 'attemptId' | 'offerApart' | 'upstreamGen'>

/** The clear of an attempt, with what admit answered of it (an Admission carries it all). */
const clearOf = (attempt: AttemptRef, req: ClearArgs): ClearRequest => ({
  ...req,
  attemptId: attempt.attemptId,
  upstreamGen: attempt.upstreamGen,
  admission: attempt,
})

const releaseOf = (attempt: AttemptRef, req: ReleaseArgs): ReleaseRequest => ({
  ...req,
  attemptId: attempt.attemptId,
  upstreamGen: attempt.upstreamGen,
})

export interface MarketSteps {
  /** The keyspace of an account's own keys (its attempts, its records): what records are written under. */
  accountKeys(accountId: string): Keyspace
  admit(req: AdmitRequest): Promise<Admission | AdmitRefusal>
  clear(attempt: AttemptRef, req: ClearArgs): Promise<Clearing>
  /** A key on each slot a clear of the attempt writes on (whose masters must keep it: the clear journal). */
  clearSlots(attempt: AttemptRef): string[]
  /** True when this call released the attempt, false when it had already ended. */
  release(attempt: AttemptRef, req: ReleaseArgs): Promise<boolean>
  /** True when the lease was pushed forward, false when it is gone (reaped or ended). */
  renew(attempt: AttemptRef, leaseMs: number): Promise<boolean>
  /**
   * Ends at most `limit` attempts whose lease ran out; returns how many it ended. tierless: a
   * replica of a build keeping no capacity tiers is seen (tiers.ts); held apart there are none.
   */
  reap(limit: number, recordRetentionMs?: number, tierless?: boolean): Promise<number>
  /** Attempts admitted and not yet ended, every replica's: their leases, wherever they are kept. */
  holdsOutstanding(): Promise<number>
  /** The ask a request of `holdDiem` would clear at now, for the account's max; nothing held (video quotes). */
  quote(
    accountId: string,
    holdDiem: MicroDiem,
    defaultMaxPriceCents: number,
  ): Promise<{ code: AdmitCode.Admitted; askCents: number } | AdmitRefusal>
  /** Finishes what waits on this replica (held apart: the queued posts); before the store closes. */
  close(): Promise<void>
  /**
   * Told by each reaper pass whether a replica of an earlier build is seen (replicas.ts). Its
   * revoke leaves no mark on the key's account, so while it is seen every admission checks the
   * key by its digest, as that build's did, instead of naming it by the ids learned before.
   */
  earlierBuildSeen(seen: boolean): void
}

/**
 * The steps for a market's keyspace: one slot, or held apart when the keyspace says so (its posts
 * queued up to postWithinMs: post-queue.ts; its view counting the replicas seen by their reaper
 * passes, every reapIntervalMs).
 */
export function marketSteps(
  store: Store,
  keys: Keyspace,
  view?: LadderView,
  postWithinMs = POST_WITHIN_MS,
  reapIntervalMs = 1_000,
): MarketSteps {
  return keys.layout === 'apart'
    ? new ApartSteps(store, keys, view, postWithinMs, seenWithinMs(reapIntervalMs))
    : new OneSlotSteps(store, keys)
}

class OneSlotSteps implements MarketSteps {
  /** The market's one slot, as a key on it: every clear writes there. */
  private readonly slots: string[]
  private readonly keyOwners = new KeyOwners()
  private readonly lastUsed = new LastUsedThrottle()

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
  ) {
    this.slots = [keys.base]
  }

  earlierBuildSeen(seen: boolean) {
    this.keyOwners.keep(!seen)
  }

  accountKeys(): Keyspace {
    return this.keys
  }

  /**
   * A key's first request is admitted by its digest, which admit resolves (and touches); its later
   * ones by the ids that answer named, until the key is refused or its entry's minute is up.
   */
  async admit(req: AdmitRequest) {
    const digest = req.apiKeyDigest
    if (!digest) return admit(this.store, this.keys, req)
    const owner = this.keyOwners.get(digest)
    if (!owner) {
      const result = await admit(this.store, this.keys, req)
      const who = whoseRequest(result)
      if (who) {
        this.keyOwners.set(digest, { accountId: who.accountId, apiKeyId: who.apiKeyId })
        this.lastUsed.touched(who.apiKeyId)
      }
      return result
    }
    const result = await admit(this.store, this.keys, { ...req, ...owner, apiKeyDigest: '' })
    if (result.code === AdmitCode.UnknownKey) this.keyOwners.drop(digest)
    // As admit writes it by digest: at most once a minute, never slowing or failing the request.
    else if (this.lastUsed.shouldTouch(owner.apiKeyId, null))
      runScript(this.store, 'touchKey', [this.keys.apiKey(digest)], {}).catch(() => {})
    return result
  }

  clear(attempt: AttemptRef, req: ClearArgs) {
    return clear(this.store, this.keys, clearOf(attempt, req))
  }

  clearSlots(): string[] {
    return this.slots
  }

  release(attempt: AttemptRef, req: ReleaseArgs) {
    return release(this.store, this.keys, releaseOf(attempt, req))
  }

  renew(attempt: AttemptRef, leaseMs: number) {
    return renewLease(this.store, this.keys, attempt.attemptId, leaseMs)
  }

  reap(limit: number, recordRetentionMs?: number, tierless?: boolean) {
    return reapExpired(this.store, this.keys, limit, recordRetentionMs, tierless)
  }

  /** Attempts admitted by a gateway from before the packed record lease in the earlier zset. */
  async holdsOutstanding() {
    const [packed, earlier] = await Promise.all([
      this.store.zcard(this.keys.leases),
      this.store.zcard(this.keys.earlierLeases),
    ])
    return packed + earlier
  }

  quote(accountId: string, holdDiem: MicroDiem, defaultMaxPriceCents: number) {
    return quote(this.store, this.keys, accountId, holdDiem, defaultMaxPriceCents)
  }

  async close() {}
}

// The view's age before a request checks the ladder's version again (and reads the ladder in full
// only when it moved: ladder-view.ts): a stale view costs a try at the next offer (the reservation
// checks the offer's own state), never a wrong price.
const VIEW_MAX_AGE_MS = 1_000
// A request the view could not place checks the version again at once (an offer posted or removed
// since), but not more often than this: a market with no supply is not checked on every request.
const VIEW_REREAD_MS = 100
/** What a stale view may cause: another read of the ladder may place the request. */
const VIEW_REFUSALS = new Set<AdmitCode>([
  AdmitCode.PoolEmpty,
  AdmitCode.NoEligibleSupply,
  AdmitCode.InsufficientRoutable,
  AdmitCode.KeysBusy,
  AdmitCode.SupplyExhausted,
])

class ApartSteps implements MarketSteps {
  private readonly owners: Owners
  private readonly view: LadderView
  private readonly index: OfferIndex
  private readonly posts: PostQueue
  // A key's owner is only a guess (key-owners.ts): the hold reads the account's mark of a revoked
  // key, so a key revoked since it was learned is refused there.
  private readonly keyOwners = new KeyOwners()
  private readonly lastUsed = new LastUsedThrottle()
  private viewReadAt = 0
  private viewRead: Promise<boolean> | null = null

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    view?: LadderView,
    postWithinMs = POST_WITHIN_MS,
    replicasWithinMs = seenWithinMs(1_000),
  ) {
    this.owners = ownerKeyspaces(keys.prefix)
    this.view = view ?? new LadderView(store, keys, this.owners, Date.now, replicasWithinMs)
    this.index = new OfferIndex(store, keys)
    this.posts = new PostQueue(store, (offerId) => this.owners.offer(offerId).base, postWithinMs)
  }

  accountKeys(accountId: string): Keyspace {
    return this.owners.account(accountId)
  }

  earlierBuildSeen(seen: boolean) {
    this.keyOwners.keep(!seen)
  }

  async admit(req: AdmitRequest): Promise<Admission | AdmitRefusal> {
    let owner: KeyOwner | null = { accountId: req.accountId, apiKeyId: req.apiKeyId }
    if (req.apiKeyDigest) {
      owner = await this.keyOwner(req.apiKeyDigest)
      if (!owner) return { code: AdmitCode.UnknownKey }
    }
    await this.freshView(VIEW_MAX_AGE_MS)
    // The buyer's max is the account's, which the hold reads: until a hold names it, no offer is
    // passed over for its price (a hold above it is refused and the view walked on below it). The
    // key is named by its ids alone: the hold reads the account's mark of a revoked key anyway, so
    // its check of the digest against the account's keys would only repeat it, unless a replica of
    // an earlier build, whose revoke leaves no mark, is seen.
    const digest = this.keyOwners.kept ? '' : (req.apiKeyDigest ?? '')
    const onView = () =>
      admitCheapest(
        this.store,
        this.owners,
        this.view,
        { ...req, ...owner, apiKeyDigest: digest, maxCents: Number.MAX_SAFE_INTEGER },
        this.posts,
      )
    let result = await onView()
    if (VIEW_REFUSALS.has(result.code) && (await this.freshView(VIEW_REREAD_MS))) result = await onView()
    if (result.code === AdmitCode.UnknownKey && req.apiKeyDigest) this.keyOwners.drop(req.apiKeyDigest)
    if (result.code === AdmitCode.Admitted || result.code === AdmitCode.UnknownKey) return result
    // A refusal names whose request it was, as admit's do, for the request's records.
    return 'who' in result ? result : Object.assign(result, { who: owner })
  }

  // Each ended request frees its slot on the offer in this replica's view, so the view's room
  // follows this replica's own traffic between reads.
  async clear(attempt: AttemptRef, req: ClearArgs) {
    const cleared = await clearApart(this.store, this.owners, attempt, clearOf(attempt, req), this.posts)
    if (!cleared.replay) this.view.ended(attempt.offerId)
    return cleared
  }

  /** The account's side, and the offer's that its post writes. */
  clearSlots(attempt: AttemptRef): string[] {
    return [this.owners.account(attempt.accountId).base, this.owners.offer(attempt.offerId).base]
  }

  async release(attempt: AttemptRef, req: ReleaseArgs) {
    const released = await releaseApart(this.store, this.owners, attempt, releaseOf(attempt, req))
    if (released) this.view.ended(attempt.offerId)
    return released
  }

  /** The reservation's lease is the offer's: renewed on the offer's own slot. */
  renew(attempt: AttemptRef, leaseMs: number) {
    return renewLease(this.store, this.owners.offer(attempt.offerId), attempt.attemptId, leaseMs)
  }

  /**
   * Creates of offers left between their steps are finished or undone (offer-index.ts); then each
   * offer ever posted (a paused or deleted one may still hold reservations) finishes its own
   * expired ones, from the account's side.
   */
  async reap(limit: number, recordRetentionMs = DEFAULT_RECORD_RETENTION_MS) {
    let reaped = await this.index.finishListings(limit)
    const offerIds = await this.store.smembers(this.keys.offers)
    for (const offerId of offerIds) {
      if (reaped >= limit) break
      reaped += await reapOffer(this.store, this.owners, offerId, limit - reaped, recordRetentionMs)
    }
    return reaped
  }

  /**
   * Each offer counts its pending reservations (every offer ever posted); not its leases, where a
   * reservation the reaper voided stays a while, watched for a late clear (reapOffer).
   */
  async holdsOutstanding() {
    const offerIds = await this.store.smembers(this.keys.offers)
    const counts = await Promise.all(
      offerIds.map((id) => this.store.hget(this.owners.offer(id).offer(id), 'inflight')),
    )
    return counts.reduce((sum, count) => sum + Number(count ?? 0), 0)
  }

  async quote(accountId: string, holdDiem: MicroDiem, defaultMaxPriceCents: number) {
    const account = this.owners.account(accountId).account(accountId)
    const [confirmed, maxPriceCents] = await this.store.hmget(account, 'confirmed', 'maxPriceCents')
    // Every account hash has a confirmed field: none means no account (lib/holds reads it so too).
    if (confirmed === null) return { code: AdmitCode.UnknownAccount } as AdmitRefusal
    await this.freshView(VIEW_MAX_AGE_MS)
    return pickFromView(this.view, Number(maxPriceCents ?? 0) || defaultMaxPriceCents, holdDiem)
  }

  close() {
    return this.posts.flush()
  }

  private async keyOwner(digest: string): Promise<KeyOwner | null> {
    let owner = this.keyOwners.get(digest)
    let lastUsedAt: number | null = null
    if (!owner) {
      const [accountId, apiKeyId, used] = await this.store.hmget(
        this.keys.apiKey(digest),
        'accountId',
        'id',
        'lastUsedAt',
      )
      if (!accountId || !apiKeyId) return null
      owner = { accountId, apiKeyId }
      this.keyOwners.set(digest, owner)
      lastUsedAt = used ? Number(used) : null
    }
    // As admit writes it on one slot: at most once a minute, never slowing or failing the request.
    if (this.lastUsed.shouldTouch(owner.apiKeyId, lastUsedAt))
      runScript(this.store, 'touchKey', [this.keys.apiKey(digest)], {}).catch(() => {})
    return owner
  }

  /**
   * Checks the view when it is older than `maxAgeMs` (the ladder read in full only when its version
   * moved or the view's period passed), one check at a time. Returns whether the view was read in
   * full.
   */
  private async freshView(maxAgeMs: number): Promise<boolean> {
    if (Date.now() - this.viewReadAt < maxAgeMs) return false
    this.viewRead ??= this.view.check().then(
      (full) => {
        this.viewReadAt = Date.now()
        this.viewRead = null
        return full
      },
      (error) => {
        this.viewRead = null
        throw error
      },
    )
    return this.viewRead
  }
}
