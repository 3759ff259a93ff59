// Suppliers as the API shows them: identity and status from the supplier hash, earnings derived
// from its offers (earned = sum of the offers' `earned`, net of the fee; the offers keep it), paid
// out and pending from the supplier hash (payouts move them). payable = earned - paidOut - pending.
import { randomBytes } from 'node:crypto'
import { ladderMoved, putOffer } from '../market/offer-index.ts'
import { formatMicros } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import { SupplierCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { supplierNotFound } from './results.ts'

export type SupplierStatus = 'active' | 'suspended'

export interface Supplier {
  id: string
  wallet: string
  status: SupplierStatus
  createdAt: number
  /** micro-USDC */
  earned: number
  paidOut: number
  pending: number
  /** Offers not deleted. */
  offerCount: number
}

export function supplierView(s: Supplier) {
  return {
    supplierId: s.id,
    wallet: s.wallet,
    status: s.status,
    earnedUsdc: formatMicros(s.earned),
    paidOutUsdc: formatMicros(s.paidOut),
    payoutPendingUsdc: formatMicros(s.pending),
    payableUsdc: formatMicros(s.earned - s.paidOut - s.pending),
    createdAt: new Date(s.createdAt).toISOString(),
  }
}

/** The operator's view: the supplier's own view and how many offers it has standing or paused. */
export function adminSupplierView(s: Supplier) {
  return { ...supplierView(s), offerCount: s.offerCount }
}

/**
 * What each offer the supplier ever posted has earned (micro-USDC) and its status, read on the
 * offers' own slots: one read per offer, not a pipeline, since held apart each has a slot of its own.
 */
export async function supplierOfferRows(store: Store, keys: Keyspace, supplierId: string) {
  const ids = await store.smembers(keys.supplierOffers(supplierId))
  const rows = await Promise.all(ids.map((id) => store.hmget(keys.offer(id), 'earned', 'status')))
  return rows.map(([earned, status], i) => ({ id: ids[i]!, earned: Number(earned ?? 0), status }))
}

/** What the supplier's offers have earned, micro-USDC: only ever growing, so a read is a lower bound. */
export async function supplierEarned(store: Store, keys: Keyspace, supplierId: string): Promise<number> {
  const rows = await supplierOfferRows(store, keys, supplierId)
  return rows.reduce((sum, row) => sum + row.earned, 0)
}

const SUPPLIER_ID = /^spl_[0-9a-f]{24}$/
export const newSupplierId = () => `spl_${randomBytes(12).toString('hex')}`
/** Checked before an id from outside becomes part of a key: `<id>:offers` would name another key. */
export const isSupplierId = (value: string) => SUPPLIER_ID.test(value)

export class SupplierStore {
  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
  ) {}

  async get(id: string): Promise<Supplier | null> {
    if (!isSupplierId(id)) return null
    const [raw, rows] = await Promise.all([
      this.store.hgetall(this.keys.supplier(id)),
      supplierOfferRows(this.store, this.keys, id),
    ])
    if (!raw.id) return null
    return {
      id: raw.id,
      wallet: raw.wallet ?? '',
      status: raw.status === 'suspended' ? 'suspended' : 'active',
      createdAt: Number(raw.createdAt ?? 0),
      earned: rows.reduce((sum, row) => sum + row.earned, 0),
      paidOut: Number(raw.paidOut ?? 0),
      pending: Number(raw.pending ?? 0),
      offerCount: rows.filter(({ status }) => status && status !== 'deleted').length,
    }
  }

  async require(id: string): Promise<Supplier> {
    const supplier = await this.get(id)
    if (!supplier) throw supplierNotFound(id)
    return supplier
  }

  /** Every supplier, oldest first. */
  async list(): Promise<Supplier[]> {
    const ids = await this.store.smembers(this.keys.suppliers)
    const all = await Promise.all(ids.map((id) => this.get(id)))
    return all
      .filter((s): s is Supplier => s !== null)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))
  }

  /**
   * Suspends or reinstates: its active offers leave or rejoin the ladder in the same script. Held
   * apart, each offer carries the status too (the request path refuses a suspended one on the
   * offer's own slot), copied after the script: whatever runs at once, each offer's copy ends as
   * the last status set (an offer placed meanwhile copies it too: OfferIndex.place).
   */
  async setStatus(id: string, status: SupplierStatus): Promise<Supplier> {
    if (!isSupplierId(id)) throw supplierNotFound(id)
    const apart = this.keys.layout === 'apart'
    if (apart && !(await this.store.exists(this.keys.supplier(id)))) throw supplierNotFound(id)
    const reply = (await runScript(this.store, 'supplierStatus', [this.keys.base], {
      supplierId: id,
      status,
    })) as number[]
    if (Number(reply[0]) !== SupplierCode.Ok) throw supplierNotFound(id)
    if (apart) await this.markOffers(id, status === 'suspended' ? 'suspend' : 'reinstate')
    return this.require(id)
  }

  private async markOffers(id: string, mode: 'suspend' | 'reinstate'): Promise<void> {
    const offerIds = await this.store.smembers(this.keys.supplierOffers(id))
    await Promise.all(offerIds.map((offerId) => putOffer(this.store, this.keys, offerId, { mode })))
    // The views read the offers again now that they carry the status, not only after the script.
    await ladderMoved(this.store, this.keys)
  }
}
