// The payout sender and reconciler: one loop on every replica, doing work only while it holds the
// payout wallet's sender lock (lua/payout-lock.lua), so one transaction at a time leaves the
// wallet across replicas. Every step is recorded by lua/payout-move.lua with the lock's fencing
// token: a sender whose lock lapsed can record nothing, and so broadcasts nothing new.
//
// A pass, oldest payout first:
// - every payout with a recorded transaction is followed to its end (follow.ts): this wallet's
//   under this wallet's lock; one signed by another payout wallet (a key rotated, replicas on
//   different keys) under that wallet's lock, read against that wallet's nonces, never signed
//   for: its recorded bytes broadcast again, confirmed at depth, failed once another transaction
//   of that wallet holds its nonce; a fee bump only that wallet's key can make is logged once;
// - then, when no transaction of the wallet is unmined, the oldest `sending` payout is signed at
//   the wallet's mined nonce (never below one already signed), recorded (rawTx and hash) and only
//   then broadcast; a suspended supplier's is withheld instead (back to payable), its status read
//   just before signing.
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { Address } from 'viem'
import type { FundingChain } from '../funding/chain.ts'
import { PayoutMoveCode } from '../redis/result-codes.ts'
import { Lease, LockLost, PayoutFollower } from './follow.ts'
import { OffPayoutChain, onPayoutChain } from './payout-chain.ts'
import type { Payout, PayoutStore } from './store.ts'
import type { PayoutWallet } from './wallet.ts'
import { TransferRefused, walletReads } from './wallet.ts'

export interface SenderOptions {
  confirmations: number
  lockTtlMs: number
  /** How long one pass waits for a receipt before leaving the payout to the next pass. */
  receiptTimeoutMs: number
  /** How long a transaction may stay unmined before it is re-signed with a higher fee. */
  bumpAfterMs: number
  /** Test seam: runs after a transaction is recorded and before it is broadcast. */
  beforeBroadcast?: (payout: Payout) => Promise<void>
}

/** Payouts sent in one pass at most, one after another. */
const SENDS_PER_PASS = 20

export class PayoutSender {
  private running: Promise<void> | null = null
  private stopped = false
  /** Payouts whose fee bump waits on another payout wallet's key, logged once each. */
  private readonly keyNeededLogged = new Set<string>()

  constructor(
    private readonly store: PayoutStore,
    private readonly wallet: PayoutWallet,
    private readonly chain: FundingChain,
    private readonly logger: Logger,
    private readonly options: SenderOptions,
  ) {}

  private get deps() {
    return { store: this.store, chain: this.chain, logger: this.logger, options: this.options }
  }

  /** One pass, unless one is under way in this process (then that one). */
  tick(): Promise<void> {
    this.running ??= this.pass().finally(() => {
      this.running = null
    })
    return this.running
  }

  /** Takes no further step (a pass under way stops at its next one). */
  stop(): void {
    this.stopped = true
  }

  private pass(): Promise<void> {
    if (this.stopped) return Promise.resolve()
    return this.holding(this.wallet.address, (lease) => this.work(lease))
  }

  /** Runs `work` while holding the sender lock of `wallet`; nothing when another holds it. */
  private async holding(wallet: string, work: (lease: Lease) => Promise<void>): Promise<void> {
    const token = randomUUID()
    const { lockTtlMs } = this.options
    if (!(await this.store.lock('acquire', wallet, token, lockTtlMs))) return
    const lease = new Lease(this.store, wallet, token, lockTtlMs, () => this.stopped)
    try {
      await work(lease)
    } catch (error) {
      if (!(error instanceof LockLost || error instanceof OffPayoutChain))
        this.logger.warn({ err: error, wallet }, 'payout pass failed; retrying')
    } finally {
      lease.end()
      if (!this.stopped) await this.store.lock('release', wallet, token, 0).catch(() => {})
    }
  }

  private async work(lease: Lease): Promise<void> {
    if (!(await onPayoutChain(this.chain, this.logger))) return
    const own = new PayoutFollower(this.deps, lease, this.wallet, this.wallet)
    const mine = this.wallet.address.toLowerCase()
    const others = new Map<string, Payout[]>()
    let unmined = false
    const open = await this.store.open()
    for (const payout of open) {
      if (!payout.rawTx || !payout.from) continue
      const from = payout.from.toLowerCase()
      if (from === mine) unmined = (await own.finish(payout)) || unmined
      else others.set(from, [...(others.get(from) ?? []), payout])
    }
    for (const [from, payouts] of others) await this.holding(from, (l) => this.finishSignedBy(l, payouts))
    for (const id of this.keyNeededLogged) if (!open.some((p) => p.id === id)) this.keyNeededLogged.delete(id)
    // One after another while each is mined in time; a bounded number per pass, so the lock
    // changes hands now and then.
    for (let sent = 0; !unmined && sent < SENDS_PER_PASS; sent++) {
      const next = (await this.store.open()).find((p) => p.state === 'sending' && !p.rawTx)
      if (!next) return
      unmined = await this.send(own, next)
    }
  }

  /**
   * Payouts another payout wallet signed, followed under that wallet's lock with its reads alone:
   * its nonces, not this wallet's, tell whether one can still be mined; none is ever signed for it.
   */
  private async finishSignedBy(lease: Lease, payouts: Payout[]): Promise<void> {
    const signer = payouts[0]!.from as Address
    // Bytes are broadcast alike whoever signed them: only the reads are that wallet's.
    const reads = { ...walletReads(signer, this.chain), broadcast: this.wallet.broadcast }
    const follower = new PayoutFollower(this.deps, lease, reads, null, (payout) => {
      if (this.keyNeededLogged.has(payout.id)) return
      this.keyNeededLogged.add(payout.id)
      this.logger.error(
        { payout: payout.id, from: payout.from, nonce: payout.nonce, txHash: payout.txHash },
        'payout unmined past SVC_PAYOUT_BUMP_MS: a higher fee needs the key of the payout wallet that signed it',
      )
    })
    for (const payout of payouts) await follower.finish(payout)
  }

  /** Signs, records, broadcasts and follows the payout's transfer; true while it is not mined. */
  private async send(own: PayoutFollower, payout: Payout): Promise<boolean> {
    // A payout asked before a suspension is not sent after it (payout-move checks again).
    if (await this.store.suspended(payout.supplierId)) return this.withhold(own, payout)
    const signedBlock = await this.chain.blockNumber()
    // Every transaction this wallet signed is mined by now (none is sent while one is unmined): the
    // next nonce is its mined count, never below one a payout was signed at (a node behind counts
    // fewer). A pending count past it (a pool's word) would leave a gap nothing of ours fills, and
    // this payout and every later one unmined for ever.
    const nonce = Math.max(await this.wallet.nonce('latest'), await this.store.nextNonce(this.wallet.address))
    // Read again now: a balancer that moved since the pass began answered that chain's nonce, and
    // signed past this chain's count the payout (and every one after it) would wait for ever.
    if (!(await onPayoutChain(this.chain, this.logger))) throw new OffPayoutChain()
    let signed: Awaited<ReturnType<PayoutWallet['sign']>>
    try {
      signed = await this.wallet.sign(payout.wallet as Address, BigInt(payout.amount), nonce)
    } catch (error) {
      if (!(error instanceof TransferRefused)) throw error
      this.logger.error({ payout: payout.id, err: error.message }, 'payout refused before sending')
      await own.step(payout, { step: 'failed', error: error.message })
      return false
    }
    // Only bytes this pass recorded are broadcast: any other answer means the payout moved on.
    const code = await own.step(payout, {
      step: 'signed',
      from: this.wallet.address,
      signedBlock,
      ...signed,
    })
    if (code === PayoutMoveCode.Suspension) return this.withhold(own, payout)
    if (code !== PayoutMoveCode.Moved) return false
    const recorded: Payout = {
      ...payout,
      from: this.wallet.address,
      ...signed,
      hashes: [signed.txHash],
      signedBlock: Number(signedBlock),
      updatedAt: Date.now(),
    }
    await this.options.beforeBroadcast?.(recorded)
    // A holder whose lock lapsed since the record leaves the broadcast to the next holder.
    await own.lease.check()
    const refused = await this.wallet.broadcast(signed.rawTx)
    if (refused)
      this.logger.warn({ payout: payout.id, err: refused }, 'payout broadcast refused; reconciling')
    this.logger.info({ payout: payout.id, txHash: signed.txHash, nonce }, 'payout sent')
    return own.finish(recorded)
  }

  /** The supplier is suspended: its unsigned payout goes back to payable. */
  private async withhold(own: PayoutFollower, payout: Payout): Promise<boolean> {
    await own.step(payout, { step: 'withheld', error: 'the supplier is suspended' })
    this.logger.warn(
      { payout: payout.id, supplier: payout.supplierId },
      'payout withheld: supplier suspended',
    )
    return false
  }
}
