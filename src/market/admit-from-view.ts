// admit's choice and the quote's for a market held apart, made from a replica's view of the ladder
// (ladder-view.ts): the offer tried is the view's guess, and the offer's own reservation decides.
import { metrics } from '../metrics/gateway-metrics.ts'
import type { MicroDiem } from '../money/units.ts'
import { AdmitCode } from '../redis/result-codes.ts'
import type { Store } from '../redis/store.ts'
import type { Admission } from './admission.ts'
import type { LadderView, OfferInView } from './ladder-view.ts'
import type { PostQueue } from './post-queue.ts'
import type { AdmitRefusal } from './refusal-errors.ts'
import { type AdmitApartRequest, admitApart, OfferUnavailable, type Owners } from './two-phase.ts'

/** What the offer's own reservation refuses: another offer may still take the request. */
const OFFER_REFUSALS = new Set<AdmitCode>([
  AdmitCode.PoolEmpty,
  AdmitCode.NoEligibleSupply,
  AdmitCode.InsufficientRoutable,
  AdmitCode.KeysBusy,
])

/**
 * admit's choice for a market held apart: the view's cheapest live offer at or below the buyer's
 * max that could hold the request and was not tried (of equal ones, the roomiest), reserved and
 * held (admitApart); an offer that refuses its reservation (the view was stale) is passed over for
 * the next, and what its reply said of its load corrects the view. Without an offer left,
 * the refusal admit gives for the view's ladder.
 */
export async function admitCheapest(
  store: Store,
  owners: Owners,
  view: LadderView,
  req: Omit<AdmitApartRequest, 'offerId'>,
  posts?: PostQueue,
): Promise<Admission | AdmitRefusal> {
  const tried = new Set(req.tried)
  // The caller's idea of the buyer's max may be stale too: the account's own, once a hold names it,
  // rules the offers after.
  let maxCents = req.maxCents
  let unavailable: OfferUnavailable | undefined
  for (const offer of view.inOrder()) {
    if (offer.ask > maxCents || tried.has(offer.id)) continue
    if (!view.worthTrying(offer, req.holdDiem)) continue
    let result: Admission | AdmitRefusal
    // Counted as taken while its reservation is on its way, so that the requests this replica
    // sends before the reply spread over the offers of one ask; the reply says how it went.
    const seen = view.reserving(offer.id, req.holdDiem)
    try {
      result = await admitApart(store, owners, { ...req, maxCents, offerId: offer.id }, posts, seen)
    } catch (error) {
      // The offer's slot is away for now: the next offer may take the request.
      if (!(error instanceof OfferUnavailable)) throw error
      metrics.reservations.inc({ outcome: 'away' })
      unavailable = error
      continue
    } finally {
      seen.settled()
    }
    metrics.reservations.inc({ outcome: seen.outcome(result.code) })
    if (!OFFER_REFUSALS.has(result.code)) return result
    if (result.code === AdmitCode.NoEligibleSupply) maxCents = Math.min(maxCents, result.buyerMaxCents)
  }
  // No offer took it, and one that might have was away: the store's outage is the answer (a 503),
  // not a lack of supply.
  if (unavailable) throw unavailable.cause
  return refusalOfView(view.current, maxCents, req.holdDiem, tried)
}

/**
 * lib/pick's choice from the view, for a quote (nothing held): the cheapest live offer at or below
 * the max, below its in-flight cap, that could hold `holdDiem`; else the refusal admit would give.
 */
export function pickFromView(
  view: LadderView,
  maxCents: number,
  holdDiem: MicroDiem,
): { code: AdmitCode.Admitted; askCents: number } | AdmitRefusal {
  for (const offer of view.current) {
    if (offer.ask > maxCents) break
    if (view.worthTrying(offer, holdDiem)) return { code: AdmitCode.Admitted, askCents: offer.ask }
  }
  return refusalOfView(view.current, maxCents, holdDiem, new Set())
}

/** lib/pick's refusals, from the view: what the buyer is told when no offer took the request. */
function refusalOfView(
  offers: readonly OfferInView[],
  maxCents: number,
  holdDiem: MicroDiem,
  tried: Set<string>,
): AdmitRefusal {
  // A cooling offer counts at its price (it will be back shortly: busy, not no supply); above the
  // max only live ones count, as lib/pick counts them.
  const atPrice = offers.filter((o) => o.active && o.ask <= maxCents)
  if (atPrice.length === 0) {
    const above = offers.filter((o) => o.live && o.ask > maxCents)
    if (above.length === 0) return { code: AdmitCode.PoolEmpty }
    return {
      code: AdmitCode.NoEligibleSupply,
      buyerMaxCents: maxCents,
      cheapestPostedCents: above[0]!.ask,
      routableAboveMax: above.reduce((sum, o) => sum + o.routable, 0),
    }
  }
  const bigEnough = atPrice.filter((o) => o.routable >= holdDiem)
  if (bigEnough.length === 0) {
    return {
      code: AdmitCode.InsufficientRoutable,
      eligibleRoutable: atPrice.reduce((sum, o) => sum + o.routable, 0),
      maxEligibleOffer: Math.max(...atPrice.map((o) => o.routable)),
    }
  }
  if (bigEnough.every((o) => tried.has(o.id))) return { code: AdmitCode.SupplyExhausted }
  // Offers big enough exist, but each is full, cooling, or refused its reservation since the view
  // was read.
  return { code: AdmitCode.KeysBusy }
}
