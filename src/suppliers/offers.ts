// Self-served offers: a supplier sells capacity on the operator's upstream (config.upstreamUrl;
// a supplier never chooses where the gateway connects). The key is checked against the
// upstream's balance endpoint before the offer stands, sealed at rest as every offer's is, and
// claimed by digest in the same script that writes the offer (lua/offer-put.lua), so one upstream
// key stands in one non-deleted offer only. A supplier sees and changes its own offers only.
import { digestApiKey } from '../accounts/api-keys.ts'
import {
  DEFAULT_MAX_IN_FLIGHT,
  OfferService,
  type OfferView,
  offerNotFound,
  supplierSuspended,
  upstreamKeyInUse,
} from '../market/offers.ts'
import type { MicroDiem } from '../money/units.ts'
import { redisNow } from '../redis/clock.ts'
import type { Keyspace } from '../redis/keys.ts'
import { MinuteFuse } from '../redis/minute-fuse.ts'
import type { Store } from '../redis/store.ts'
import { keyCheckCeilingReached, keyCheckFuseBlown } from './results.ts'
import { checkUpstreamKey } from './upstream-key-check.ts'

/**
 * Upstream key checks a supplier may make per minute, across every replica, by default
 * (SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE): each is a call to the operator's upstream with a key of the
 * supplier's choosing, so past it a post is a 429 before the upstream is asked (never a way to
 * test keys, or to load the upstream, as fast as one likes).
 */
export const KEY_CHECKS_PER_MINUTE = 10

/**
 * Upstream key checks of every supplier together per minute, across every replica, by default
 * (SVC_KEY_CHECKS_PER_MINUTE_TOTAL): suppliers cost nothing to create, so the per-supplier fuse
 * alone would let many of them load the operator's upstream (and have its address limited there).
 */
export const KEY_CHECKS_PER_MINUTE_TOTAL = 120

export interface SupplierOfferInput {
  upstreamApiKey: string
  askCents: number
  capacity: MicroDiem
  maxInFlight?: number
}

export interface SupplierOfferChange {
  askCents?: number
  capacity?: MicroDiem
  status?: 'active' | 'paused'
}

/** What a supplier sees of its offer: never the upstream key, nor where the gateway connects. */
export function supplierOfferView(offer: OfferView) {
  return {
    id: offer.id,
    askCents: offer.askCents,
    status: offer.status,
    capacityDiem: offer.capacityDiem,
    burnedDiem: offer.burnedDiem,
    heldDiem: offer.heldDiem,
    upstreamBalanceDiem: offer.upstreamBalanceDiem,
    maxInFlight: offer.maxInFlight,
    inFlight: offer.inFlight,
    earnedUsdc: offer.earnedUsdc,
    disputedDiem: offer.disputedDiem,
    coolingDownUntil: offer.coolingDownUntil,
    createdAt: offer.createdAt,
  }
}

export type SupplierOfferView = ReturnType<typeof supplierOfferView>

export class SupplierOfferService {
  private readonly offers: OfferService
  private readonly keyChecks: MinuteFuse
  private readonly marketKeyChecks: MinuteFuse

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    masterKey: Uint8Array,
    private readonly upstreamUrl: string,
    keyChecksPerMinute = KEY_CHECKS_PER_MINUTE,
    keyChecksPerMinuteTotal = KEY_CHECKS_PER_MINUTE_TOTAL,
    /** The fuses' clock, ms: a test holds one minute instead of racing the next. */
    clock?: () => number,
  ) {
    this.offers = new OfferService(store, keys, masterKey)
    this.keyChecks = new MinuteFuse(
      store,
      keys.supplierKeyChecks,
      keyChecksPerMinute,
      keyCheckFuseBlown,
      clock,
    )
    this.marketKeyChecks = new MinuteFuse(
      store,
      keys.keyChecks,
      keyChecksPerMinuteTotal,
      keyCheckCeilingReached,
      clock,
    )
  }

  async post(supplierId: string, input: SupplierOfferInput): Promise<SupplierOfferView> {
    const digest = digestApiKey(input.upstreamApiKey)
    // Refused without asking the upstream when the answer is known already; offer-put decides.
    const [status, holder] = await Promise.all([
      this.store.hget(this.keys.supplier(supplierId), 'status'),
      this.store.hget(this.keys.upstreamKeys, digest),
    ])
    if (status === 'suspended') throw supplierSuspended()
    // A holder deleted on its own slot but not yet given its key back (held apart) is left to create.
    if (holder && (await this.store.hget(this.keys.offer(holder), 'status')) !== 'deleted')
      throw upstreamKeyInUse()
    // The supplier's own count first: one past it never spends the market's. Both turn over with
    // the same minute, so a supplier charged under the market's refusal loses nothing it could use.
    await this.keyChecks.take(supplierId)
    await this.marketKeyChecks.take()
    // On Redis's clock, as the scripts judge the day: a check across a midnight tells no balance.
    const since = await redisNow(this.store)
    const micros = await checkUpstreamKey(this.upstreamUrl, input.upstreamApiKey)
    const offer = await this.offers.create({
      ...this.fields(input),
      supplierId,
      upstreamKeyDigest: digest,
      upstreamBalance: micros === null ? undefined : { micros, since },
    })
    return supplierOfferView(offer)
  }

  private fields(input: SupplierOfferInput) {
    return {
      upstreamBaseUrl: this.upstreamUrl,
      upstreamApiKey: input.upstreamApiKey,
      askCents: input.askCents,
      capacity: input.capacity,
      maxInFlight: input.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT,
      status: 'active' as const,
    }
  }

  async list(supplierId: string): Promise<SupplierOfferView[]> {
    return (await this.offers.list(supplierId)).map(supplierOfferView)
  }

  async get(supplierId: string, id: string): Promise<SupplierOfferView> {
    const offer = await this.offers.get(id)
    if (!offer || offer.supplierId !== supplierId) throw offerNotFound(id)
    return supplierOfferView(offer)
  }

  async update(supplierId: string, id: string, change: SupplierOfferChange): Promise<SupplierOfferView> {
    return supplierOfferView(await this.offers.update(id, { ...change, supplierId }))
  }

  async remove(supplierId: string, id: string): Promise<void> {
    await this.offers.remove(id, supplierId)
  }
}
