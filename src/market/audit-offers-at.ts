// The live audit's reads of an offer held apart (audit-slots-apart.ts, cli/audit-sums-apart.ts): its
// hash, its leases and its leased reservations at one instant, in one MULTI on its slot. reserve
// leases each reservation it makes and post and void end it with its lease (or keep the lease for
// the reaper's watch), in the same script: a pending reservation is a leased one. A lease of a
// reservation the MULTI did not read yet sends it again, with that one, until it read them all.
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { ownerKeyspaces } from './two-phase.ts'

/** One offer as one MULTI on its slot read it. */
export interface OfferAt {
  offerId: string
  row: Record<string, string>
  /** attempt id -> its lease's deadline, ms */
  leases: Map<string, number>
  /** attempt id -> its leased reservation */
  reservations: Map<string, Record<string, string>>
  /** The clock of the offer's master when read, ms: the deadlines are by it. */
  now: number
}

/** Reads of one offer before it stands as read: each misses only reservations leased meanwhile. */
const TRIES = 20

export async function readOfferAt(store: Store, keys: Keyspace, offerId: string): Promise<OfferAt> {
  const own = ownerKeyspaces(keys.prefix).offer(offerId)
  let ids: string[] = []
  for (let tries = 0; ; tries++) {
    const multi = store.multi().hgetall(own.offer(offerId)).time().zrange(own.leases, 0, -1, 'WITHSCORES')
    for (const id of ids) multi.hgetall(own.reservation(id))
    const replies = ((await multi.exec()) ?? []).map(([error, value]) => (error ? undefined : value))
    const [seconds, micros] = (replies[1] as [string, string] | undefined) ?? ['0', '0']
    const flat = (replies[2] as string[] | undefined) ?? []
    const at: OfferAt = {
      offerId,
      row: (replies[0] as Record<string, string> | undefined) ?? {},
      leases: new Map(),
      reservations: new Map(),
      now: Number(seconds) * 1000 + Math.floor(Number(micros) / 1000),
    }
    for (let i = 0; i + 1 < flat.length; i += 2) at.leases.set(flat[i]!, Number(flat[i + 1]))
    ids.forEach((id, i) => {
      const row = replies[3 + i] as Record<string, string> | undefined
      if (row && Object.keys(row).length > 0 && at.leases.has(id)) at.reservations.set(id, row)
    })
    const unread = [...at.leases.keys()].filter((id) => !ids.includes(id))
    if (unread.length === 0 || tries === TRIES) return at
    ids = [...at.leases.keys()]
  }
}

/** Every offer of the market, each at one instant of its own. */
export async function readOffersAt(store: Store, keys: Keyspace, offerIds: string[]): Promise<OfferAt[]> {
  return Promise.all(offerIds.map((id) => readOfferAt(store, keys, id)))
}

/** What an offer's pending (reserved) reservations hold and count. */
export function pendingOf(at: OfferAt): { held: number; slots: number } {
  let held = 0
  let slots = 0
  for (const r of at.reservations.values()) {
    if (r.state !== 'reserved' || r.offerId !== at.offerId) continue
    held += Number(r.holdDiem ?? 0)
    slots++
  }
  return { held, slots }
}
