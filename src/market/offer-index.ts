// The market's side of offers held apart: each offer's hash lives under its own tag, its indexes,
// its supplier and the ladder on the market's (lua/index-offer.lua). A create lists the offer
// there, writes it on its own slot (lua/offer-put.lua), then places it; every change places it
// after its write, listed again before it. A replica that stops between two steps leaves a listing
// behind, which the reaper finishes (the offer was written: it is placed as it stands) or undoes
// (never written: it is written deleted, so a late write finds it taken, and its upstream key is
// given back).

import { redisNow } from '../redis/clock.ts'
import type { Keyspace } from '../redis/keys.ts'
import { runScript, type ScriptArgs } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { MAX_SUPPLIER_OFFERS, MAX_SUPPLIER_OFFERS_POSTED } from './offer-limits.ts'
import { type Owners, ownerKeyspaces } from './two-phase.ts'

/** A ladder score is ask x LADDER_STEP + posting order (lib/offers.lua's LADDER_STEP). */
export const LADDER_STEP = 1_000_000_000

/** An offer's place on the ladder, from its hash's ask and posting order. */
export const ladderScore = (ask: string | null | undefined, seq: string | null | undefined) =>
  Number(ask ?? 0) * LADDER_STEP + Number(seq ?? 0)
/** Places of one change before it leaves the rest to the changes that keep moving the offer. */
const PLACE_TRIES = 5
/** The field of the market's hash that counts the ladder's changes (lib/ladder.lua's ladder_moved). */
export const LADDER_VERSION = 'ladderVersion'

/**
 * Moves the ladder's version: after a change of an offer's standing written on the offer's own
 * slot (a supplier's suspension copied onto it), so that every view reads it again.
 */
export async function ladderMoved(store: Store, keys: Keyspace): Promise<void> {
  await store.hincrby(keys.market, LADDER_VERSION, 1)
}

/** How long a listing may wait for its create's next steps before the reaper takes it as left behind. */
export const LISTING_GRACE_MS = 60_000

type OfferPutArgs = ScriptArgs<'offerPut'>
type IndexArgs = ScriptArgs<'indexOffer'>

const NO_CHANGE: OfferPutArgs = {
  mode: 'update',
  offerId: '',
  upstreamBaseUrl: '',
  upstreamKeyEnc: '',
  askCents: '',
  capacity: '',
  maxInFlight: '',
  status: '',
  supplier: '',
  supplierId: '',
  upstreamKeyDigest: '',
  maxStanding: MAX_SUPPLIER_OFFERS,
  maxEver: MAX_SUPPLIER_OFFERS_POSTED,
  seq: '',
  apart: '',
  upstreamBalance: '',
  balanceSince: '',
}

/** lua/offer-put.lua on the offer's own slot (held apart) or the market's: only the named values change. */
export async function putOffer(
  store: Store,
  keys: Keyspace,
  offerId: string,
  args: Partial<OfferPutArgs> & Pick<OfferPutArgs, 'mode'>,
): Promise<(string | number)[]> {
  const apart = keys.layout === 'apart'
  return (await runScript(store, 'offerPut', [apart ? keys.offerBase(offerId) : keys.base], {
    ...NO_CHANGE,
    ...args,
    offerId,
    apart: apart ? '1' : '',
  })) as (string | number)[]
}

/** index-offer's arguments a step does not use. */
const NO_INDEX: Omit<IndexArgs, 'mode' | 'offerId'> = {
  supplierId: '',
  upstreamKeyDigest: '',
  status: '',
  score: '',
  maxStanding: MAX_SUPPLIER_OFFERS,
  maxEver: MAX_SUPPLIER_OFFERS_POSTED,
}

export class OfferIndex {
  private readonly owners: Owners

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
  ) {
    this.owners = ownerKeyspaces(keys.prefix)
  }

  /** lua/index-offer.lua on the market's slot: only the named values given. */
  private async index(args: Partial<IndexArgs> & Pick<IndexArgs, 'mode' | 'offerId'>) {
    return (await runScript(this.store, 'indexOffer', [this.keys.base], { ...NO_INDEX, ...args })) as (
      | string
      | number
    )[]
  }

  /** The first step of a create: index-offer's `list` reply ({1, posting order} or a refusal). */
  async list(offerId: string, supplierId: string, digest: string): Promise<(string | number)[]> {
    return this.index({ mode: 'list', offerId, supplierId, upstreamKeyDigest: digest })
  }

  /**
   * Before a change of a written offer: listed, so that the reaper places it should its place not
   * follow. `caller`: the supplier asking (none for the operator); another's offer is neither
   * listed nor to be placed (false), so that a refused change moves nothing, the ladder's version
   * included. An offer's owner never changes once written, so this read decides for the change.
   */
  async touch(offerId: string, caller?: string): Promise<boolean> {
    const [id, supplierId] = await this.store.hmget(
      this.owners.offer(offerId).offer(offerId),
      'id',
      'supplierId',
    )
    if (!id) return true
    if (caller && supplierId !== caller) return false
    await this.index({ mode: 'touch', offerId, supplierId: supplierId ?? '' })
    return true
  }

  /**
   * Places an offer as its own state says (the ladder while active, its supplier's copy); none
   * written: nothing. Two changes placing at once may place in the other order than they wrote:
   * each reads the offer again after its place and places again while it moved, so the last place
   * is always of the offer as it stands.
   */
  async place(offerId: string): Promise<void> {
    let state = await this.placing(offerId)
    for (let tries = 0; state && tries < PLACE_TRIES; tries++) {
      const reply = await this.index({
        mode: 'place',
        offerId,
        supplierId: state.supplierId,
        status: state.status,
        score: state.score,
      })
      if (Number(reply[0]) === 2) await this.copySuspension(offerId, state.supplierId)
      const now = await this.placing(offerId)
      if (now?.status === state.status && now.score === state.score) return
      state = now
    }
  }

  /** What a place writes of the offer, read on its own slot; null when it was never written. */
  private async placing(offerId: string) {
    const [status, ask, seq, supplierId] = await this.store.hmget(
      this.owners.offer(offerId).offer(offerId),
      'status',
      'askCents',
      'seq',
      'supplierId',
    )
    if (!status) return null
    return { status, score: ladderScore(ask, seq), supplierId: supplierId ?? '' }
  }

  /**
   * Its supplier was suspended while the offer was being written: the offer carries the suspension
   * too, unless a reinstatement came between (whose own copy may have run before this one).
   */
  private async copySuspension(offerId: string, supplierId: string): Promise<void> {
    await putOffer(this.store, this.keys, offerId, { mode: 'suspend' })
    if ((await this.store.hget(this.keys.supplier(supplierId), 'status')) !== 'suspended')
      await putOffer(this.store, this.keys, offerId, { mode: 'reinstate' })
    await ladderMoved(this.store, this.keys)
  }

  /**
   * Whether the upstream key `holder` claimed is free to claim again: it was deleted on its own slot
   * but not yet placed so (a replica stopped between the two steps), and is placed now.
   */
  async release(holder: string): Promise<boolean> {
    const status = await this.store.hget(this.owners.offer(holder).offer(holder), 'status')
    if (status !== 'deleted') return false
    await this.place(holder)
    return true
  }

  /**
   * Finishes or undoes at most `limit` creates listed more than `graceMs` ago and never placed;
   * returns how many.
   */
  async finishListings(limit: number, graceMs = LISTING_GRACE_MS): Promise<number> {
    const now = await redisNow(this.store)
    const left = await this.store.zrangebyscore(
      this.keys.offersListing,
      '-inf',
      now - graceMs,
      'LIMIT',
      0,
      limit,
    )
    for (const listing of left) {
      const cut = listing.indexOf(':')
      const offerId = listing.slice(0, cut)
      // Never written: written deleted now, so that a create still on its way finds the id taken.
      await putOffer(this.store, this.keys, offerId, { mode: 'void', supplierId: listing.slice(cut + 1) })
      await this.place(offerId)
    }
    return left.length
  }
}
