// A replica's view of the ladder for a market whose offers live on slots of their own: the
// offers in ask order (the ladder, on the market's own slot) and each one's state as last read
// from its own slot. The view is only a guess at which offer to try first: admitCheapest
// (admit-from-view.ts) reserves on the offer itself (lua/reserve.lua checks it against its own
// state), so a stale view costs a try at the next offer, never a reservation at a wrong price or
// past capacity.
// A full read (the ladder, then every offer's row) costs the market's slot and each offer's; so the
// view reads in full only when the ladder's version moved (every change of the ladder or of an
// offer's standing moves it: lua/lib/ladder.lua) or its last full read is older than a period that
// grows with the replicas seen, so that the market's full reads stay near one a second however many
// replicas read it. Between full reads each reservation's reply keeps the offer's state current.
import type { MicroDiem } from '../money/units.ts'
import { dayOf } from '../records/days.ts'
import type { Keyspace } from '../redis/keys.ts'
import { AdmitCode } from '../redis/result-codes.ts'
import type { Store } from '../redis/store.ts'
import { LADDER_STEP, LADDER_VERSION } from './offer-index.ts'
import { fullReadPeriodMs, seenWithinMs } from './replicas.ts'
import type { OfferReply, Owners, ReservationSeen } from './two-phase.ts'

/** One offer as the view last read it. */
export interface OfferInView {
  id: string
  ask: number
  /** What it could hold for new requests, micro-DIEM (lib/offers routable). */
  routable: number
  /** Posted and not paused (an active offer may be cooling down). */
  active: boolean
  /** Active, not cooling down, and not refused as unavailable since the last full read. */
  live: boolean
  /** When its cooldown ends (ms): live again then, without another read. */
  cooldownUntil: number
  /** Refused as unavailable with no end given (paused, its supplier suspended): until read again. */
  away: boolean
  /** Its posting order: its place among the offers of one ask, whatever its ask becomes. */
  seq: number
  /** At its in-flight cap. */
  full: boolean
  /**
   * Its requests in flight as this replica reckons them: the count last read or given by a
   * reservation's reply, less this replica's requests on it that ended since, plus its
   * reservations on their way.
   */
  inflight: number
  reported: number
  onTheWay: number
  maxInFlight: number
  /**
   * When the view last learnt its room (a full read, a reservation's reply, or a reservation sent):
   * past ROOM_KNOWN_MS the view no longer takes "full" or "too small" on trust.
   */
  learntAt: number
}

/**
 * How long what the view learnt of an offer's room holds. Between full reads the view hears only
 * of its own replica's requests: other replicas' requests that end free slots and give holds back
 * unseen, so an offer the view counts as full or too small is tried again after this long, and the
 * reply says how it stands.
 */
export const ROOM_KNOWN_MS = 1_000

/** A pipeline's replies, in order; the first error thrown. */
async function replies(pipeline: ReturnType<Store['pipeline']>): Promise<unknown[]> {
  return ((await pipeline.exec()) ?? []).map(([error, value]) => {
    if (error) throw error
    return value
  })
}

const FIELDS = [
  'status',
  'askCents',
  'capacity',
  'burned',
  'held',
  'balance',
  'maxInFlight',
  'inflight',
  'cooldownUntil',
  'suspended',
  'balanceDay',
]

export class LadderView {
  private offers: OfferInView[] = []
  private byId = new Map<string, OfferInView>()
  /** The ladder's version at the last full read; undefined before the first. */
  private version: string | null | undefined = undefined
  private fullReadAt = Number.NEGATIVE_INFINITY
  /** The replicas seen at the last check: the more, the longer the period between full reads. */
  private replicas = 1

  constructor(
    private readonly store: Store,
    /** The keyspace of the ladder itself (the market's own tag). */
    private readonly market: Keyspace,
    private readonly owners: Owners,
    private readonly clock: () => number = Date.now,
    /** How long a replica counts as live after its last reaper pass (replicas.ts). */
    private readonly replicasWithinMs = seenWithinMs(1_000),
  ) {}

  /** The offers as the view holds them, cheapest first. */
  get current(): readonly OfferInView[] {
    this.wake()
    return this.offers
  }

  /** How long this view goes between full reads while the ladder's version stays. */
  get fullReadPeriod(): number {
    return fullReadPeriodMs(this.replicas)
  }

  /**
   * Reads the ladder's version and the replicas seen (one round on the market's slot), then the
   * ladder and every offer only when the version moved since the last full read or that read is
   * older than the period. Returns whether it read in full.
   */
  async check(): Promise<boolean> {
    const [version, replicas] = await replies(
      this.store
        .pipeline()
        .hget(this.market.market, LADDER_VERSION)
        .zcount(this.market.replicas, this.clock() - this.replicasWithinMs, '+inf'),
    )
    this.replicas = Number(replicas ?? 0)
    const now = this.clock()
    // A new UTC day resets the supplier keys' balances: the routable figures read before it may be
    // capped by a balance that no longer holds.
    const sameDay = dayOf(now) === dayOf(this.fullReadAt)
    if (version === this.version && now - this.fullReadAt < this.fullReadPeriod && sameDay) return false
    await this.refresh()
    return true
  }

  /**
   * Reads the ladder (its version first, so that a change after the read moves it past the one
   * kept), then every offer on it from its own slot (one read per offer).
   */
  async refresh(): Promise<void> {
    const startedAt = this.clock()
    const [version, ladder] = await replies(
      this.store
        .pipeline()
        .hget(this.market.market, LADDER_VERSION)
        .zrange(this.market.ladder, 0, -1, 'WITHSCORES'),
    )
    const scored = ladder as string[]
    const ids = scored.filter((_, i) => i % 2 === 0)
    const rows = await Promise.all(
      ids.map((id) => this.store.hmget(this.owners.offer(id).offer(id), ...FIELDS)),
    )
    const now = this.clock()
    const num = (value: string | null | undefined) => Number(value ?? 0)
    const today = dayOf(now)
    this.offers = ids.flatMap((id, i) => {
      const [
        status,
        ask,
        capacity,
        burned,
        held,
        balance,
        maxInFlight,
        inflight,
        cooldownUntil,
        suspended,
        day,
      ] = rows[i]!
      // A suspended supplier's offer is not supply, whatever its own status (lua/reserve.lua refuses it).
      if (!status || suspended === '1') return []
      let left = num(capacity) - num(burned)
      // As lib/offers reads it: a balance learned on an earlier UTC day (or none) no longer holds.
      const known = balance !== null && balance !== '' && num(day) >= today
      if (known && num(balance) < left) left = num(balance)
      return [
        {
          id,
          ask: num(ask),
          routable: Math.max(0, left - num(held)),
          active: status === 'active',
          live: status === 'active' && num(cooldownUntil) <= now,
          cooldownUntil: num(cooldownUntil),
          away: false,
          seq: num(scored[2 * i + 1]) % LADDER_STEP,
          full: num(inflight) >= num(maxInFlight),
          inflight: num(inflight),
          reported: num(inflight),
          onTheWay: 0,
          maxInFlight: num(maxInFlight),
          learntAt: now,
        },
      ]
    })
    this.byId = new Map(this.offers.map((offer) => [offer.id, offer]))
    this.version = version as string | null
    this.fullReadAt = startedAt
  }

  /**
   * The offers in the order a request tries them: cheapest first, and among offers of one ask the
   * one with the most room below its cap first, so that a market's equal offers share its requests
   * instead of each request trying them in the same order and the first ones refusing most.
   */
  *inOrder(): Generator<OfferInView> {
    this.wake()
    // A reply that moves an ask orders a new array: the walk under way keeps this one.
    const offers = this.offers
    for (let i = 0; i < offers.length; ) {
      let end = i + 1
      while (end < offers.length && offers[end]!.ask === offers[i]!.ask) end++
      if (end - i === 1) yield offers[i]!
      else
        yield* offers.slice(i, end).sort((a, b) => b.maxInFlight - b.inflight - (a.maxInFlight - a.inflight))
      i = end
    }
  }

  /**
   * A reservation of `holdDiem` on `offerId` is on its way: its slot counts as taken until its
   * reply. What it is told of the reservation goes to `seen`, and `settled` is called once it is
   * over either way.
   */
  reserving(
    offerId: string,
    holdDiem: MicroDiem,
  ): ReservationSeen & {
    settled(): void
    outcome(code: AdmitCode): string
  } {
    const offer = this.byId.get(offerId)
    if (offer) {
      this.count(offer, offer.reported, offer.onTheWay + 1)
      // Its room is in question until the reply: this replica's other requests go by what it knew.
      offer.learntAt = this.clock()
    }
    let replied = false
    let voided = false
    let unavailable = false
    return {
      replied: (reply) => {
        replied = true
        unavailable = reply.unavailable !== undefined
        if (offer) this.learn(offer, reply)
      },
      voided: () => {
        voided = true
        if (!offer) return
        this.count(offer, offer.reported - 1, offer.onTheWay)
        // Its reply counted the hold out of the offer's routable: the void gives it back.
        offer.routable += holdDiem
      },
      /** The reservation's outcome, for svc_reservations_total, from the admission's code. */
      outcome: (code) =>
        voided ? 'voided' : unavailable ? 'unavailable' : (RESERVATION_OUTCOMES.get(code) ?? 'taken'),
      settled: () => {
        if (!replied && offer) this.count(offer, offer.reported, offer.onTheWay - 1)
      },
    }
  }

  /** What a reservation's reply said of its offer, taken into the view. */
  private learn(offer: OfferInView, reply: OfferReply): void {
    if (reply.unavailable) {
      // Paused, cooling down or suspended since the view was read: passed over until its cooldown
      // ends, or else until read again.
      offer.live = false
      if (reply.unavailable.until === null) offer.away = true
      else offer.cooldownUntil = reply.unavailable.until
    }
    if (reply.load) {
      offer.maxInFlight = reply.load.maxInFlight
      this.count(offer, reply.load.inflight, offer.onTheWay - 1)
    } else {
      this.count(offer, offer.reported, offer.onTheWay - 1)
    }
    if (reply.routable !== undefined) offer.routable = reply.routable
    if (reply.load || reply.routable !== undefined) offer.learntAt = this.clock()
    if (reply.ask !== undefined && reply.ask !== offer.ask) {
      offer.ask = reply.ask
      this.offers = [...this.offers].sort((a, b) => a.ask - b.ask || a.seq - b.seq)
    }
  }

  /** Offers whose cooldown ended since the view learnt of it are live again. */
  private wake(): void {
    const now = this.clock()
    for (const offer of this.offers) {
      if (!offer.live && offer.active && !offer.away && offer.cooldownUntil <= now) offer.live = true
    }
  }

  /**
   * Whether a request of `holdDiem` may go to `offer`: live, and with room for it as far as the view
   * knows, or knew so long ago (ROOM_KNOWN_MS) that the offer's own answer is worth asking.
   */
  worthTrying(offer: OfferInView, holdDiem: number): boolean {
    if (!offer.live) return false
    if (!offer.full && offer.routable >= holdDiem) return true
    return this.clock() - offer.learntAt >= ROOM_KNOWN_MS
  }

  /** One of this replica's requests on `offerId` ended: its slot is free again. */
  ended(offerId: string): void {
    const offer = this.byId.get(offerId)
    if (offer) this.count(offer, offer.reported - 1, offer.onTheWay)
  }

  private count(offer: OfferInView, reported: number, onTheWay: number): void {
    offer.reported = Math.max(0, reported)
    offer.onTheWay = Math.max(0, onTheWay)
    offer.inflight = offer.reported + offer.onTheWay
    offer.full = offer.inflight >= offer.maxInFlight
  }
}

/** The offer's refusals of a reservation, by name (every other code took it). */
const RESERVATION_OUTCOMES = new Map<AdmitCode, string>([
  [AdmitCode.KeysBusy, 'full'],
  [AdmitCode.NoEligibleSupply, 'price'],
  [AdmitCode.InsufficientRoutable, 'capacity'],
  [AdmitCode.PoolEmpty, 'gone'],
  [AdmitCode.DuplicateAttempt, 'duplicate'],
])
