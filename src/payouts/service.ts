// Payouts as the routes and tools use them: a supplier asks (amount and Idempotency-Key checked
// here, the money rules in lua/payout-create.lua), lists and reads its own; the operator lists
// those in flight. Without a payout wallet configured every request is a 503 and nothing changes.
import { checkedIdempotencyDigest } from '../accounts/idempotency-key.ts'
import type { PayoutConfig } from '../config.ts'
import { badRequest } from '../errors.ts'
import { parseMicros } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { payoutNotFound, payoutsUnavailable } from './results.ts'
import { type Payout, type PayoutState, PayoutStore, payoutView } from './store.ts'

export class PayoutService {
  readonly store: PayoutStore

  constructor(
    store: Store,
    keys: Keyspace,
    private readonly config: PayoutConfig,
    /** Wakes the sender after a payout is created (the sender also runs on its interval). */
    private readonly wake: () => void = () => {},
    /** This gateway's payout wallet (its sender's); absent without a payout key. */
    private readonly wallet?: string,
  ) {
    this.store = new PayoutStore(store, keys)
  }

  get available(): boolean {
    return this.config.privateKey !== undefined
  }

  async request(supplierId: string, amountUsdc: string, idempotencyKey: string | null) {
    if (!this.available) throw payoutsUnavailable()
    if (idempotencyKey === null) {
      throw badRequest(
        'send an Idempotency-Key header (1 to 255 visible characters)',
        'idempotency_key_required',
      )
    }
    checkedIdempotencyDigest(idempotencyKey)
    const amount = parseMicros(amountUsdc)
    if (amount === null || amount <= 0) {
      throw badRequest('amountUsdc must be a positive USDC amount with at most 6 decimals', 'invalid_amount')
    }
    const { payout, created } = await this.store.create(
      supplierId,
      amount,
      idempotencyKey,
      this.config.minMicros,
    )
    if (created) this.wake()
    return { payout: payoutView(payout), created }
  }

  list(supplierId: string, limit: number, before: string | null) {
    return this.store.list(supplierId, limit, before)
  }

  /** A supplier's own payout; another's is a 404. */
  async get(supplierId: string, id: string) {
    const payout = await this.store.get(id)
    if (!payout || payout.supplierId !== supplierId) throw payoutNotFound(id)
    return payoutView(payout)
  }

  /**
   * Payouts in flight (sending, pending), oldest first, for the operator; one state when named.
   * Each with the wallet that signed it (`from`) and `signingKeyNeeded`: unmined past
   * SVC_PAYOUT_BUMP_MS and signed by a wallet other than this gateway's, so the higher fee it
   * waits for needs that wallet's key (its recorded bytes are still broadcast and followed).
   */
  async inFlight(state?: PayoutState) {
    const open = await this.store.open()
    const now = Date.now()
    const signingKeyNeeded = (p: Payout) =>
      p.state === 'sending' &&
      p.from !== null &&
      p.from.toLowerCase() !== this.wallet?.toLowerCase() &&
      now - p.updatedAt >= this.config.bumpAfterMs
    return {
      object: 'list' as const,
      data: open
        .filter((p: Payout) => state === undefined || p.state === state)
        .map((p) => ({
          ...payoutView(p),
          supplierId: p.supplierId,
          nonce: p.nonce,
          from: p.from,
          signingKeyNeeded: signingKeyNeeded(p),
        })),
    }
  }
}
