// The payout sender and reconciler: one loop on every replica, doing work only while it holds the
// payout wallet's sender lock (lua/payout-lock.lua), so one transaction at a time leaves the
// wallet across replicas. Every step is recorded by lua/payout-move.lua with the lock's fencing
// token: a sender whose lock lapsed can record nothing, and so broadcasts nothing new.
//
// A pass, oldest payout first:
// - a payout with a recorded transaction (a crash, a receipt that did not come in time) is
//   finished: the receipts of every hash it signed read, or its bytes broadcast again (the same
//   hash: never paid twice), re-signed at the same nonce with a higher fee once unmined for
//   SVC_PAYOUT_BUMP_MS, or failed when the chain proves it can never be mined: another
//   transaction of the wallet holds its nonce, found in a block and confirmed. A missing receipt
//   alone proves nothing (a node behind, a load balancer): reads that disagree mean wait;
// - a pending payout with SVC_CONFIRMATIONS confirmations becomes confirmed; one a reorg moved is
//   counted from its new block, one a reorg took out (its nonce no longer held by any of its
//   hashes, not merely a receipt read that found nothing) goes back to sending (the same bytes again);
// - then, when no transaction of the wallet is unmined, the oldest `sending` payout is signed at
//   the wallet's pending nonce (never below one already signed), recorded (rawTx and hash) and only then broadcast; a suspended
//   supplier's is withheld instead (back to payable), its status read just before signing.
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { Address, Hex } from 'viem'
import type { FundingChain } from '../funding/chain.ts'
import { PayoutMoveCode } from '../redis/result-codes.ts'
import type { Payout, PayoutStep, PayoutStore } from './store.ts'
import type { PayoutWallet } from './wallet.ts'
import { TransferRefused } from './wallet.ts'

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

/** The lock was lost during the pass: stop at once, take no further step. */
class LockLost extends Error {}

export class PayoutSender {
  private running: Promise<void> | null = null
  private stopped = false

  constructor(
    private readonly store: PayoutStore,
    private readonly wallet: PayoutWallet,
    private readonly chain: FundingChain,
    private readonly logger: Logger,
    private readonly options: SenderOptions,
  ) {}

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

  private async pass(): Promise<void> {
    if (this.stopped) return
    const token = randomUUID()
    const { lockTtlMs } = this.options
    if (!(await this.store.lock('acquire', this.wallet.address, token, lockTtlMs))) return
    const lease = new Lease(this.store, this.wallet.address, token, lockTtlMs, () => this.stopped)
    try {
      await this.work(lease)
    } catch (error) {
      if (!(error instanceof LockLost)) this.logger.warn({ err: error }, 'payout pass failed; retrying')
    } finally {
      lease.end()
      if (!this.stopped) await this.store.lock('release', this.wallet.address, token, 0).catch(() => {})
    }
  }

  private async work(lease: Lease): Promise<void> {
    let unmined = false
    for (const payout of await this.store.open()) {
      if (!payout.rawTx) continue
      // Signed by another payout wallet (a key rotated, replicas on different keys): its nonce, its
      // fee bumps and its lock are that wallet's; read against this one, another of this wallet's
      // transactions at the same nonce would fail it while its own bytes can still be mined.
      if (payout.from?.toLowerCase() !== this.wallet.address.toLowerCase()) {
        this.logger.warn(
          { payout: payout.id, from: payout.from },
          'payout signed by another payout wallet; left to it',
        )
        continue
      }
      unmined = (await this.finish(lease, payout)) || unmined
    }
    // One after another while each is mined in time; a bounded number per pass, so the lock
    // changes hands now and then.
    for (let sent = 0; !unmined && sent < SENDS_PER_PASS; sent++) {
      const next = (await this.store.open()).find((p) => p.state === 'sending' && !p.rawTx)
      if (!next) return
      unmined = await this.send(lease, next)
    }
  }

  /** Signs, records, broadcasts and follows the payout's transfer; true while it is not mined. */
  private async send(lease: Lease, payout: Payout): Promise<boolean> {
    // A payout asked before a suspension is not sent after it (payout-move checks again).
    if (await this.store.suspended(payout.supplierId)) return this.withhold(lease, payout)
    const signedBlock = await this.chain.blockNumber()
    // A node behind may count fewer: never below a nonce a payout was signed at.
    const nonce = Math.max(
      await this.wallet.nonce('pending'),
      await this.store.nextNonce(this.wallet.address),
    )
    let signed: Awaited<ReturnType<PayoutWallet['sign']>>
    try {
      signed = await this.wallet.sign(payout.wallet as Address, BigInt(payout.amount), nonce)
    } catch (error) {
      if (!(error instanceof TransferRefused)) throw error
      this.logger.error({ payout: payout.id, err: error.message }, 'payout refused before sending')
      await this.step(lease, payout, { step: 'failed', error: error.message })
      return false
    }
    // Only bytes this pass recorded are broadcast: any other answer means the payout moved on.
    const code = await this.step(lease, payout, {
      step: 'signed',
      from: this.wallet.address,
      signedBlock,
      ...signed,
    })
    if (code === PayoutMoveCode.Suspension) return this.withhold(lease, payout)
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
    await lease.check()
    const refused = await this.wallet.broadcast(signed.rawTx)
    if (refused)
      this.logger.warn({ payout: payout.id, err: refused }, 'payout broadcast refused; reconciling')
    this.logger.info({ payout: payout.id, txHash: signed.txHash, nonce }, 'payout sent')
    return this.finish(lease, recorded)
  }

  /**
   * Follows a recorded transaction to its end as far as the chain allows now; true while it is not
   * mined (no other transaction of the wallet may be sent then).
   */
  private async finish(lease: Lease, payout: Payout): Promise<boolean> {
    let hash = payout.txHash as Hex
    let block = payout.blockNumber === null ? null : BigInt(payout.blockNumber)
    let state = payout.state
    if (state === 'pending') {
      const moved = await this.reorged(lease, payout, block)
      if (moved === 'final') return false
      if (moved === 'dropped') {
        state = 'sending'
        block = null
      } else ({ hash, block } = moved)
    }
    if (state === 'sending') {
      const mined = await this.mined(lease, payout)
      if (mined === 'failed') return false
      if (mined === 'unmined') return true
      hash = mined.hash
      block = mined.blockNumber
    }
    const head = await this.chain.blockNumber()
    if (block === null || head - block + 1n < BigInt(this.options.confirmations)) return false
    // Confirm only what the chain still holds where it was counted; a reorg since is the next
    // pass's to follow.
    const receipt = await this.chain.receipt(hash)
    if (receipt?.status !== 'success' || receipt.blockNumber !== block) return false
    await this.step(lease, payout, { step: 'confirmed', blockNumber: receipt.blockNumber })
    this.logger.info({ payout: payout.id, txHash: hash }, 'payout confirmed')
    return false
  }

  /**
   * A signed payout's transaction as the chain shows it now: the hash mined and its block
   * (recorded as included), 'failed' (reverted, or its nonce held by another transaction,
   * confirmed), or 'unmined': broadcast again (re-signed with a higher fee once it waited
   * bumpAfterMs) and not mined within receiptTimeoutMs, or mined by the chain's word but not yet
   * by every read.
   */
  private async mined(lease: Lease, payout: Payout) {
    // Every hash signed at the nonce is a candidate; only one of them can ever be mined.
    let found = await this.receiptOfAny(payout.hashes)
    if (!found) {
      let hash = payout.txHash as Hex
      if ((await this.wallet.nonce('latest')) > (payout.nonce ?? 0)) {
        const holder = await this.wallet.nonceHolder(payout.nonce ?? 0, BigInt(payout.signedBlock ?? 0))
        if (!holder) return 'unmined' as const
        if (!payout.hashes.includes(holder.hash)) return this.nonceTaken(lease, payout, holder)
        // mined by the block's word: its receipt is awaited like any other's
        hash = holder.hash
      } else if (Date.now() - payout.updatedAt >= this.options.bumpAfterMs) {
        hash = (await this.bump(lease, payout)).txHash as Hex
      } else await this.wallet.broadcast(payout.rawTx as Hex)
      const receipt = await this.chain.waitForReceipt(hash, this.options.receiptTimeoutMs)
      if (!receipt) return 'unmined' as const
      found = { hash, receipt }
    }
    if (found.receipt.status === 'reverted') {
      if (!(await this.finallyReverted(found.hash, found.receipt.blockNumber))) return 'unmined' as const
      await this.step(lease, payout, {
        step: 'failed',
        error: `reverted in block ${found.receipt.blockNumber}`,
      })
      return 'failed' as const
    }
    await this.step(lease, payout, {
      step: 'included',
      txHash: found.hash,
      blockNumber: found.receipt.blockNumber,
    })
    return { hash: found.hash, blockNumber: found.receipt.blockNumber }
  }

  /**
   * A revert is final once its block has its confirmations and still holds it reverted: a reorg
   * before then puts the same signed bytes back in the pool, where they may succeed. Until then
   * the payout is not failed, and its amount not payable again.
   */
  private async finallyReverted(hash: Hex, blockNumber: bigint): Promise<boolean> {
    const head = await this.chain.blockNumber()
    if (head - blockNumber + 1n < BigInt(this.options.confirmations)) return false
    const again = await this.chain.receipt(hash)
    return again?.status === 'reverted' && again.blockNumber === blockNumber
  }

  private async receiptOfAny(hashes: Hex[]) {
    for (const hash of hashes) {
      const receipt = await this.chain.receipt(hash)
      if (receipt) return { hash, receipt }
    }
    return null
  }

  /**
   * Another transaction of the wallet holds the payout's nonce: failed once that one has its
   * confirmations (the payout's own can then never be mined); until then 'unmined'.
   */
  private async nonceTaken(lease: Lease, payout: Payout, holder: { hash: Hex; blockNumber: bigint }) {
    const head = await this.chain.blockNumber()
    if (head - holder.blockNumber + 1n < BigInt(this.options.confirmations)) return 'unmined' as const
    this.logger.warn({ payout: payout.id, holder: holder.hash }, 'payout nonce held by another transaction')
    await this.step(lease, payout, { step: 'failed', error: 'its nonce was used by another transaction' })
    return 'failed' as const
  }

  /** Re-signs the payout at its nonce with a higher fee, records the hash, then broadcasts it. */
  private async bump(lease: Lease, payout: Payout): Promise<Payout> {
    const bumped = await this.wallet.bump(payout.rawTx as Hex)
    // A replacement the wallet cannot pay for is refused by every node: recorded, it would only
    // raise the fee the next one must beat, pass after pass, past anything the wallet will hold.
    if ((await this.wallet.gasBalance()) < bumped.cost) {
      this.logger.warn(
        { payout: payout.id, wallet: this.wallet.address },
        'payout wallet cannot pay a higher fee',
      )
      await this.wallet.broadcast(payout.rawTx as Hex)
      return payout
    }
    const code = await this.step(lease, payout, {
      step: 'bumped',
      txHash: bumped.txHash,
      rawTx: bumped.rawTx,
    })
    if (code !== PayoutMoveCode.Moved) return payout
    await lease.check()
    const refused = await this.wallet.broadcast(bumped.rawTx)
    this.logger.info(
      { payout: payout.id, txHash: bumped.txHash, nonce: bumped.nonce, refused },
      'payout re-signed with a higher fee',
    )
    return {
      ...payout,
      txHash: bumped.txHash,
      rawTx: bumped.rawTx,
      hashes: [...payout.hashes, bumped.txHash],
    }
  }

  /** The supplier is suspended: its unsigned payout goes back to payable. */
  private async withhold(lease: Lease, payout: Payout): Promise<boolean> {
    await this.step(lease, payout, { step: 'withheld', error: 'the supplier is suspended' })
    this.logger.warn(
      { payout: payout.id, supplier: payout.supplierId },
      'payout withheld: supplier suspended',
    )
    return false
  }

  /**
   * A pending payout as the chain holds it now: its block (another one after a reorg), 'dropped'
   * when a reorg took its transaction out (back to sending: the recorded bytes go out again), or
   * 'final' when it now reverts.
   */
  private async reorged(lease: Lease, payout: Payout, block: bigint | null) {
    const hash = payout.txHash as Hex
    const receipt = await this.chain.receipt(hash)
    if (!receipt) {
      // A receipt read that finds nothing may come from a node behind: the transaction left the
      // chain only when its nonce is no longer held by one of the payout's own hashes.
      const holder = await this.wallet.nonceHolder(payout.nonce ?? 0, BigInt(payout.signedBlock ?? 0))
      if (holder && payout.hashes.includes(holder.hash)) {
        // the same hash, or (a reorg) another of its signings mined in its place
        if (holder.hash !== hash || holder.blockNumber !== block) {
          await this.step(lease, payout, {
            step: 'included',
            txHash: holder.hash,
            blockNumber: holder.blockNumber,
          })
        }
        return { hash: holder.hash, block: holder.blockNumber }
      }
      this.logger.warn(
        { payout: payout.id, txHash: hash },
        'payout transaction left the chain; sending it again',
      )
      await this.step(lease, payout, { step: 'dropped', txHash: hash })
      return 'dropped' as const
    }
    if (receipt.status === 'reverted') {
      // Not confirmed yet: it stays pending, and is never confirmed while it reverts.
      if (!(await this.finallyReverted(hash, receipt.blockNumber)))
        return { hash, block: receipt.blockNumber }
      await this.step(lease, payout, { step: 'failed', error: `reverted in block ${receipt.blockNumber}` })
      return 'final' as const
    }
    if (receipt.blockNumber !== block) {
      await this.step(lease, payout, { step: 'included', txHash: hash, blockNumber: receipt.blockNumber })
    }
    return { hash, block: receipt.blockNumber }
  }

  private async step(lease: Lease, payout: Payout, step: PayoutStep): Promise<PayoutMoveCode> {
    const code = await this.store.move(payout.id, this.wallet.address, lease.token, step)
    if (code === PayoutMoveCode.NotHolder) throw new LockLost()
    if (code < 0 && code !== PayoutMoveCode.Suspension)
      this.logger.error({ payout: payout.id, step: step.step, code }, 'payout step refused')
    return code
  }
}

/** The sender lock while a pass holds it: renewed on a timer, checked before a broadcast. */
class Lease {
  private readonly timer: ReturnType<typeof setInterval>
  private lost = false

  constructor(
    private readonly store: PayoutStore,
    private readonly wallet: string,
    readonly token: string,
    private readonly ttlMs: number,
    private readonly stopped: () => boolean,
  ) {
    this.timer = setInterval(
      () => {
        this.check().catch(() => {})
      },
      Math.max(10, Math.floor(ttlMs / 3)),
    )
  }

  /** Renews the lock; throws LockLost when it is gone (or this process stopped sending). */
  async check(): Promise<void> {
    if (this.stopped()) this.lost = true
    if (!this.lost && !(await this.store.lock('renew', this.wallet, this.token, this.ttlMs))) this.lost = true
    if (this.lost) {
      this.end()
      throw new LockLost()
    }
  }

  end(): void {
    clearInterval(this.timer)
  }
}
