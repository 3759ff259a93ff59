// Payouts in Redis: created by lua/payout-create.lua (payable -> pending, in `sending`), moved by
// lua/payout-move.lua under the payout wallet's sender lock (lua/payout-lock.lua), read here.
import { randomBytes } from 'node:crypto'
import { digestIdempotencyKey } from '../accounts/idempotency-key.ts'
import { formatMicros } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import { PayoutCreateCode, type PayoutMoveCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { supplierNotFound } from '../suppliers/results.ts'
import { supplierEarned } from '../suppliers/store.ts'
import { idempotencyKeyReused, payoutAbovePayable, payoutBelowMinimum, payoutSuspended } from './results.ts'

export type PayoutState = 'sending' | 'pending' | 'confirmed' | 'failed'
export const PAYOUT_STATES: readonly PayoutState[] = ['sending', 'pending', 'confirmed', 'failed']

export interface Payout {
  id: string
  supplierId: string
  wallet: string
  from: string | null
  /** micro-USDC */
  amount: number
  state: PayoutState
  createdAt: number
  updatedAt: number
  nonce: number | null
  /** The mined transaction's hash once included; before, the last one signed. */
  txHash: `0x${string}` | null
  /** Every hash signed for the payout (one nonce, so only one can ever be mined), oldest first. */
  hashes: `0x${string}`[]
  /** The bytes broadcast: the last transaction signed. */
  rawTx: `0x${string}` | null
  /** The head when it was first signed: its nonce's holder can only be mined after. */
  signedBlock: number | null
  blockNumber: number | null
  error: string | null
}

export type PayoutStep =
  | { step: 'signed'; from: string; nonce: number; txHash: string; rawTx: string; signedBlock: bigint }
  | { step: 'bumped'; txHash: string; rawTx: string }
  | { step: 'withheld'; error: string }
  | { step: 'included'; txHash: string; blockNumber: bigint }
  | { step: 'dropped'; txHash: string }
  | { step: 'confirmed'; blockNumber: bigint }
  | { step: 'failed'; error: string }

const orNull = (value: string | undefined) => (value ? value : null)

function parse(raw: Record<string, string>): Payout {
  return {
    id: raw.id!,
    supplierId: raw.supplierId ?? '',
    wallet: raw.wallet ?? '',
    from: orNull(raw.from),
    amount: Number(raw.amount ?? 0),
    state: (raw.state ?? 'sending') as PayoutState,
    createdAt: Number(raw.createdAt ?? 0),
    updatedAt: Number(raw.updatedAt ?? 0),
    nonce: raw.nonce ? Number(raw.nonce) : null,
    txHash: orNull(raw.txHash) as Payout['txHash'],
    hashes: (raw.hashes || raw.txHash || '').split(',').filter(Boolean) as Payout['hashes'],
    rawTx: orNull(raw.rawTx) as Payout['rawTx'],
    signedBlock: raw.signedBlock ? Number(raw.signedBlock) : null,
    blockNumber: raw.blockNumber ? Number(raw.blockNumber) : null,
    error: orNull(raw.error),
  }
}

/** What a supplier (and the operator) sees of a payout: never the signed transaction itself. */
export function payoutView(p: Payout) {
  return {
    id: p.id,
    amountUsdc: formatMicros(p.amount),
    wallet: p.wallet,
    state: p.state,
    txHash: p.txHash,
    blockNumber: p.blockNumber,
    error: p.error,
    createdAt: new Date(p.createdAt).toISOString(),
    updatedAt: new Date(p.updatedAt).toISOString(),
  }
}

export class PayoutStore {
  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
  ) {}

  /** Creates a payout (or finds the one this Idempotency-Key made); throws its refusal. */
  async create(
    supplierId: string,
    amount: number,
    idempotencyKey: string,
    minimum: number,
  ): Promise<{ payout: Payout; created: boolean }> {
    const digest = digestIdempotencyKey(idempotencyKey)
    // Held apart, the offers' earnings are on their own slots: read first, a bound the script checks.
    const earned = this.keys.layout === 'apart' ? await supplierEarned(this.store, this.keys, supplierId) : ''
    for (;;) {
      const id = `po_${randomBytes(12).toString('hex')}`
      const reply = (await runScript(this.store, 'payoutCreate', [this.keys.base], {
        supplierId,
        payoutId: id,
        amount,
        idempotencyDigest: digest,
        minimum,
        earned,
      })) as (string | number)[]
      const code = Number(reply[0])
      if (code === PayoutCreateCode.IdTaken) continue
      if (code === PayoutCreateCode.UnknownSupplier) throw supplierNotFound(supplierId)
      if (code === PayoutCreateCode.Suspended) throw payoutSuspended()
      if (code === PayoutCreateCode.BelowMinimum) throw payoutBelowMinimum(minimum)
      if (code === PayoutCreateCode.AbovePayable) throw payoutAbovePayable(Number(reply[1]))
      if (code === PayoutCreateCode.KeyReused) throw idempotencyKeyReused(String(reply[1]))
      const payout = await this.get(String(reply[1]))
      if (!payout) throw new Error(`payout ${reply[1]} vanished`)
      return { payout, created: Number(reply[2]) === 1 }
    }
  }

  async get(id: string): Promise<Payout | null> {
    // Checked before it becomes a key: `sender:<wallet>` would name the sender's lock.
    if (!PAYOUT_ID.test(id)) return null
    const raw = await this.store.hgetall(this.keys.payout(id))
    return raw.id ? parse(raw) : null
  }

  /**
   * The supplier's payouts, newest first, `limit` of them after the cursor (a payout id from an
   * earlier page). Payouts are never removed and new ones rank first, so the cursor's rank, read
   * afresh, always marks where the last page ended.
   */
  async list(supplierId: string, limit: number, before: string | null) {
    const zset = this.keys.supplierPayouts(supplierId)
    let start = 0
    if (before !== null) {
      const rank = await this.store.zrevrank(zset, before)
      if (rank === null) return { object: 'list' as const, data: [], nextCursor: null }
      start = rank + 1
    }
    const ids = await this.store.zrevrange(zset, start, start + limit)
    const rows = await this.many(ids.slice(0, limit))
    return {
      object: 'list' as const,
      data: rows.map(payoutView),
      nextCursor: ids.length > limit ? ids[limit - 1]! : null,
    }
  }

  /** Open payouts (sending or pending), oldest first: the sender's work. */
  async open(): Promise<Payout[]> {
    return this.many(await this.store.zrange(this.keys.payoutsOpen, 0, -1))
  }

  async many(ids: string[]): Promise<Payout[]> {
    if (ids.length === 0) return []
    const pipeline = this.store.pipeline()
    for (const id of ids) pipeline.hgetall(this.keys.payout(id))
    const rows = ((await pipeline.exec()) ?? []).map(([, raw]) => raw as Record<string, string>)
    return rows.filter((raw) => raw.id).map(parse)
  }

  /** The wallet's next nonce as its signed payouts count it (0 before any). */
  async nextNonce(wallet: string): Promise<number> {
    return Number((await this.store.get(this.keys.payoutNextNonce(wallet.toLowerCase()))) ?? 0)
  }

  /** Whether the supplier is suspended now (its unsigned payouts are withheld). */
  async suspended(supplierId: string): Promise<boolean> {
    return (await this.store.hget(this.keys.supplier(supplierId), 'status')) === 'suspended'
  }

  /** Takes one step of a payout under the sender lock: the script's code (NotHolder: the lock is not held with `token`). */
  async move(id: string, wallet: string, token: string, step: PayoutStep): Promise<PayoutMoveCode> {
    // The step's own values follow the named arguments, as payout-move's header lists them.
    const values: (string | number)[] = []
    if (step.step === 'signed')
      values.push(step.from, step.nonce, step.txHash, step.rawTx, step.signedBlock.toString())
    if (step.step === 'bumped') values.push(step.txHash, step.rawTx)
    if (step.step === 'withheld') values.push(step.error)
    if (step.step === 'included') values.push(step.txHash, step.blockNumber.toString())
    if (step.step === 'dropped') values.push(step.txHash)
    if (step.step === 'confirmed') values.push(step.blockNumber.toString())
    if (step.step === 'failed') values.push(step.error)
    const reply = (await runScript(
      this.store,
      'payoutMove',
      [this.keys.base],
      { payoutId: id, step: step.step, wallet: wallet.toLowerCase(), token },
      values,
    )) as (string | number)[]
    return Number(reply[0]) as PayoutMoveCode
  }

  /** acquire, renew or release the payout wallet's sender lock; true when held (or released). */
  async lock(mode: 'acquire' | 'renew' | 'release', wallet: string, token: string, ttlMs: number) {
    const reply = (await runScript(this.store, 'payoutLock', [this.keys.base], {
      action: mode,
      wallet: wallet.toLowerCase(),
      token,
      ttlMs,
    })) as number[]
    return Number(reply[0]) === 1
  }
}

/** A payout id, as payout-create makes them (and a payout list's cursor). */
export const PAYOUT_ID = /^po_[0-9a-f]{24}$/
