// Offers: what a supplier sells (an upstream key, an ask in cents per dollar, capacity in DIEM).
// Creation and every change go through lua/offer-put.lua, so an offer and its ladder place move
// together. Held apart (each offer under a tag of its own), the offer's step runs on its own slot
// and lua/index-offer.lua lists and places it on the market's, where its supplier, its limits and
// its upstream key's claim are (offer-index.ts).
import { createHmac } from 'node:crypto'
import { checkedIdempotencyDigest } from '../accounts/idempotency-key.ts'
import { ApiError, NO_RETRY } from '../errors.ts'
import { formatMicros, type MicroDiem, type MicroUsdc } from '../money/units.ts'
import { dayOf } from '../records/days.ts'
import type { Keyspace } from '../redis/keys.ts'
import { OfferCode } from '../redis/result-codes.ts'
import type { Store } from '../redis/store.ts'
import { OfferIndex, putOffer } from './offer-index.ts'
import { MAX_SUPPLIER_OFFERS, MAX_SUPPLIER_OFFERS_POSTED } from './offer-limits.ts'
import { newOfferId } from './offer-placement.ts'
import { encryptUpstreamKey } from './upstream-key-crypto.ts'

export const ASK_MIN_CENTS = 30
export const ASK_MAX_CENTS = 80
/** A million DIEM per offer keeps every sum and product of capacities an exact integer. */
export const MAX_CAPACITY_MICRO_DIEM = 1_000_000 * 1_000_000
/** The longest upstream key and supplier label an offer takes (the admin API's bounds). */
export const MAX_UPSTREAM_KEY_CHARS = 1024
export const MAX_SUPPLIER_LABEL_CHARS = 128
export type OfferStatus = 'active' | 'paused' | 'deleted'

export interface OfferInput {
  upstreamBaseUrl?: string
  upstreamApiKey?: string
  askCents?: number
  capacity?: MicroDiem
  maxInFlight?: number
  status?: 'active' | 'paused'
  supplier?: string
  /**
   * A self-served offer's supplier: on create its owner; on update and delete only its own offer
   * is found (another's is a 404).
   */
  supplierId?: string
  /** On create, SHA-256 hex of the upstream key: one non-deleted offer per key (409 past it). */
  upstreamKeyDigest?: string
  /**
   * The DIEM balance the upstream told for upstreamApiKey when it vouched for it, and when that
   * check was sent (ms, Redis's clock): the offer's balance for that UTC day (lua/offer-put.lua).
   */
  upstreamBalance?: { micros: MicroDiem; since: number }
}

/** What the operator API shows of an offer: never the upstream key. */
export interface OfferView {
  id: string
  supplier: string | null
  /** The supplier that posted it itself; null for the operator's offers. */
  supplierId: string | null
  upstreamBaseUrl: string
  askCents: number
  status: OfferStatus
  capacityDiem: string
  burnedDiem: string
  heldDiem: string
  upstreamBalanceDiem: string | null
  maxInFlight: number
  inFlight: number
  earnedUsdc: string
  /** Burn its supplier reported beyond what requests could be billed: never paid. */
  disputedDiem: string
  coolingDownUntil: string | null
  createdAt: string
}

export interface OfferRecord {
  id: string
  upstreamBaseUrl: string
  upstreamKeyEnc: string
  askCents: number
  status: OfferStatus
}

/** An offer id, as create makes them; checked before an id from outside becomes part of a key. */
const OFFER_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

export const DEFAULT_MAX_IN_FLIGHT = 64

/** What a create needs; the rest of OfferInput may be given. */
export type NewOffer = Required<
  Pick<OfferInput, 'upstreamBaseUrl' | 'upstreamApiKey' | 'askCents' | 'capacity'>
> &
  OfferInput

const withDefaults = (input: NewOffer): OfferInput => ({
  maxInFlight: DEFAULT_MAX_IN_FLIGHT,
  ...input,
  status: input.status ?? 'active',
})

export const offerNotFound = (id: string) => new ApiError(404, 'offer_not_found', `offer '${id}' not found`)

export const supplierSuspended = () =>
  new ApiError(
    403,
    'supplier_suspended',
    'the supplier is suspended: its offers cannot be posted or activated',
    {
      headers: NO_RETRY,
    },
  )

export const upstreamKeyInUse = () =>
  new ApiError(
    409,
    'upstream_key_in_use',
    'this upstream key already stands in an offer; delete that offer first',
    {
      headers: NO_RETRY,
    },
  )

/** Throws the refusal an offer script answered (lua/offer-put.lua, lua/index-offer.lua's list). */
function refuseOn(reply: (string | number)[], id: string): void {
  const code = Number(reply[0])
  if (code === OfferCode.UnknownOffer) throw offerNotFound(id)
  if (code === OfferCode.UpstreamKeyInUse) throw upstreamKeyInUse()
  if (code === OfferCode.SupplierSuspended) throw supplierSuspended()
  if (code === OfferCode.UnknownSupplier) throw new ApiError(404, 'supplier_not_found', 'supplier not found')
  if (code === OfferCode.OfferLimit) {
    throw new ApiError(
      409,
      'offer_limit',
      Number(reply[1]) === MAX_SUPPLIER_OFFERS
        ? `a supplier may have ${MAX_SUPPLIER_OFFERS} offers standing; delete one first`
        : `a supplier may post ${MAX_SUPPLIER_OFFERS_POSTED} offers in all`,
      { headers: NO_RETRY },
    )
  }
  if (code === OfferCode.SupplierUpstream) {
    throw new ApiError(
      409,
      'supplier_offer_upstream',
      "a supplier's offer keeps the upstream key and URL it was posted with (its supplier is paid for what that key serves); the supplier deletes it and posts another",
      { headers: NO_RETRY },
    )
  }
  if (code === OfferCode.BelowUsed) {
    throw new ApiError(
      409,
      'capacity_below_used',
      `capacity cannot go below what is burned (${formatMicros(Number(reply[1]))}) plus held (${formatMicros(Number(reply[2]))}) DIEM`,
    )
  }
}

function view(raw: Record<string, string>): OfferView {
  const num = (field: string) => Number(raw[field] ?? 0)
  const cooldown = num('cooldownUntil')
  return {
    id: raw.id!,
    supplier: raw.supplier || null,
    supplierId: raw.supplierId || null,
    upstreamBaseUrl: raw.upstreamBaseUrl ?? '',
    askCents: num('askCents'),
    status: (raw.status ?? 'paused') as OfferStatus,
    capacityDiem: formatMicros(num('capacity')),
    burnedDiem: formatMicros(num('burned')),
    heldDiem: formatMicros(num('held')),
    // Known only on the UTC day it was learned (lib/offers read_offer): the allocation resets at 00:00.
    upstreamBalanceDiem:
      raw.balance && num('balanceDay') >= dayOf(Date.now()) ? formatMicros(Number(raw.balance)) : null,
    maxInFlight: num('maxInFlight'),
    inFlight: num('inflight'),
    earnedUsdc: formatMicros(num('earned') as MicroUsdc),
    disputedDiem: formatMicros(num('disputed')),
    coolingDownUntil: cooldown > Date.now() ? new Date(cooldown).toISOString() : null,
    createdAt: new Date(num('createdAt')).toISOString(),
  }
}

export class OfferService {
  private readonly index: OfferIndex

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    private readonly masterKey: Uint8Array,
  ) {
    this.index = new OfferIndex(store, keys)
  }

  private async put(mode: 'create' | 'update' | 'delete', id: string, input: OfferInput): Promise<void> {
    if (!OFFER_ID.test(id)) throw offerNotFound(id)
    const apart = this.keys.layout === 'apart'
    const sealed =
      input.upstreamApiKey === undefined ? '' : encryptUpstreamKey(this.masterKey, input.upstreamApiKey)
    // Listed on the market's slot first (its supplier and upstream key checked there), so that an
    // offer on its own slot is always in the audit's set.
    const seq = apart && mode === 'create' ? await this.listApart(id, input) : ''
    // Another supplier's offer: a 404 before anything is listed or placed.
    if (apart && mode !== 'create' && !(await this.index.touch(id, input.supplierId))) throw offerNotFound(id)
    const reply = await putOffer(this.store, this.keys, id, {
      mode,
      upstreamBaseUrl: input.upstreamBaseUrl ?? '',
      upstreamKeyEnc: sealed,
      askCents: input.askCents ?? '',
      capacity: input.capacity ?? '',
      maxInFlight: input.maxInFlight ?? '',
      status: input.status ?? '',
      supplier: input.supplier ?? '',
      supplierId: input.supplierId ?? '',
      upstreamKeyDigest: input.upstreamKeyDigest ?? '',
      seq,
      upstreamBalance: input.upstreamBalance?.micros ?? '',
      balanceSince: input.upstreamBalance?.since ?? '',
    })
    // Placed after every step, refused or not: a change asked again also places one whose first
    // stopped before its place (a delete's gives the upstream key back).
    if (apart) await this.index.place(id)
    refuseOn(reply, id)
  }

  /** A create's first step held apart: the offer listed on the market's slot; its posting order. */
  private async listApart(id: string, input: OfferInput): Promise<string> {
    const supplierId = input.supplierId ?? ''
    const digest = input.upstreamKeyDigest ?? ''
    let reply = await this.index.list(id, supplierId, digest)
    // The key's holder was deleted but not yet placed so: given back, and claimed again.
    if (Number(reply[0]) === OfferCode.UpstreamKeyInUse && (await this.index.release(String(reply[1]))))
      reply = await this.index.list(id, supplierId, digest)
    refuseOn(reply, id)
    return String(reply[1])
  }

  async create(input: NewOffer, id?: string): Promise<OfferView> {
    id ??= await newOfferId(this.store, this.keys)
    await this.put('create', id, withDefaults(input))
    // Deleted before this read (its id listed and deleted at once): gone, a 404.
    const offer = await this.get(id)
    if (!offer) throw offerNotFound(id)
    return offer
  }

  /**
   * Creates an offer under an operator's Idempotency-Key (as a hand credit takes one): the same key
   * again with the same fields answers the offer it made (`replayed`, whatever happened to it
   * since) and creates nothing; with other fields it is a 409 idempotency_key_reused. The key's
   * record names the offer's id before the offer is created, so a retry after a create that
   * stopped part-way creates that same offer.
   */
  async createOnce(
    input: NewOffer,
    idempotencyKey: string,
  ): Promise<{ offer: OfferView; replayed: boolean }> {
    const record = this.keys.offerCreateKey(checkedIdempotencyDigest(idempotencyKey))
    const fields = createHmac('sha256', this.masterKey)
      .update(JSON.stringify(Object.entries(withDefaults(input)).sort()))
      .digest('hex')
    const fresh = await newOfferId(this.store, this.keys)
    if ((await this.store.set(record, `${fields} ${fresh}`, 'NX')) === 'OK') {
      try {
        return { offer: await this.create(input, fresh), replayed: false }
      } catch (error) {
        // A refusal creates nothing and keeps no key, so the key may be sent again with other fields.
        if (error instanceof ApiError && !(await this.store.exists(this.keys.offer(fresh))))
          await this.store.del(record)
        throw error
      }
    }
    const [was, id] = ((await this.store.get(record)) ?? '').split(' ')
    if (!id) throw new Error(`offer create key ${record} holds no offer id`)
    if (was !== fields) {
      throw new ApiError(
        409,
        'idempotency_key_reused',
        'this Idempotency-Key was used for an offer of other fields (nothing created)',
        { extra: { offerId: id }, headers: NO_RETRY },
      )
    }
    const made = await this.get(id)
    if (made) return { offer: made, replayed: true }
    // Not written yet (its create stopped part-way, or runs now): created here; found if it ran.
    try {
      return { offer: await this.create(input, id), replayed: true }
    } catch (error) {
      const found = await this.get(id)
      if (found) return { offer: found, replayed: true }
      throw error
    }
  }

  async update(id: string, input: OfferInput): Promise<OfferView> {
    await this.put('update', id, input)
    // Deleted between its change and this read (a DELETE of the same offer at once): gone, a 404.
    const offer = await this.get(id)
    if (!offer) throw offerNotFound(id)
    return offer
  }

  /** Deletes an offer (a supplier's own only, when `supplierId` is given); its upstream key is freed. */
  async remove(id: string, supplierId?: string): Promise<void> {
    await this.put('delete', id, { supplierId })
  }

  async get(id: string): Promise<OfferView | null> {
    if (!OFFER_ID.test(id)) return null
    const raw = await this.store.hgetall(this.keys.offer(id))
    if (!raw.id || raw.status === 'deleted') return null
    return view(raw)
  }

  /** Every offer not deleted, cheapest first; only a supplier's own when `supplierId` is given. */
  async list(supplierId?: string): Promise<OfferView[]> {
    const ids = await this.store.smembers(
      supplierId === undefined ? this.keys.offers : this.keys.supplierOffers(supplierId),
    )
    // One read per offer, not a pipeline: held apart, each offer is on a slot of its own.
    const rows = await Promise.all(ids.map((id) => this.store.hgetall(this.keys.offer(id))))
    return rows
      .filter((raw) => raw.id && raw.status !== 'deleted')
      .map(view)
      .sort((a, b) => a.askCents - b.askCents || a.createdAt.localeCompare(b.createdAt))
  }

  /** The routing facts of one offer, with its sealed key (for the supplier call only). */
  async record(id: string): Promise<OfferRecord | null> {
    const [baseUrl, sealed, ask, status] = await this.store.hmget(
      this.keys.offer(id),
      'upstreamBaseUrl',
      'upstreamKeyEnc',
      'askCents',
      'status',
    )
    if (!baseUrl || !sealed) return null
    return {
      id,
      upstreamBaseUrl: baseUrl,
      upstreamKeyEnc: sealed,
      askCents: Number(ask),
      status: status as OfferStatus,
    }
  }
}
