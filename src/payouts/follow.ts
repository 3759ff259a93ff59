// Following a signed payout's transaction to its end, one pass at a time, under the sender lock of
// the wallet that signed it (lua/payout-lock.lua, fenced by lua/payout-move.lua):
// - a payout with a recorded transaction (a crash, a receipt that did not come in time) is
//   finished: the receipts of every hash it signed read, or its bytes broadcast again (the same
//   hash: never paid twice), re-signed at the same nonce with a higher fee once unmined for
//   SVC_PAYOUT_BUMP_MS, or failed when the chain proves it can never be mined: another
//   transaction of the wallet holds its nonce, found in a block and confirmed, or it reverted, at
//   depth, and the token logged no transfer of it. A missing receipt alone proves nothing (a node
//   behind, a load balancer): reads that disagree mean wait;
// - a pending payout with SVC_CONFIRMATIONS confirmations becomes confirmed; one a reorg moved is
//   counted from its new block, one a reorg took out (its nonce no longer held by any of its
//   hashes, not merely a receipt read that found nothing) goes back to sending (the same bytes again).
// A receipt counts only while its block is still the chain's at its height: a node on a fork a
// reorg left answers the receipt it holds there, as if the transaction were mined. A block that
// cannot be read ends the pass (the next reads again).
// Only the fee bump needs the signing wallet's key: a payout signed by another payout wallet (a key
// rotated) is followed with its wallet's reads alone, and its recorded bytes broadcast again when
// a bump is due.
import type { Logger } from 'pino'
import type { Address, Hex } from 'viem'
import { type FundingChain, hasTransfer, type Receipt } from '../funding/chain.ts'
import { PayoutMoveCode } from '../redis/result-codes.ts'
import { OffPayoutChain, onPayoutChain } from './payout-chain.ts'
import type { SenderOptions } from './sender.ts'
import type { Payout, PayoutStep, PayoutStore } from './store.ts'
import type { PayoutWallet, WalletReads } from './wallet.ts'

/** The lock was lost during the pass: stop at once, take no further step. */
export class LockLost extends Error {}

export interface FollowDeps {
  store: PayoutStore
  chain: FundingChain
  logger: Logger
  options: SenderOptions
}

export class PayoutFollower {
  constructor(
    private readonly deps: FollowDeps,
    readonly lease: Lease,
    /** The signing wallet's nonces and transactions, and a broadcast of its recorded bytes. */
    private readonly reads: WalletReads,
    /** The signing wallet's key; null for another payout wallet's payouts (no fee bump then). */
    private readonly key: PayoutWallet | null,
    /** A fee bump is due and only the signing wallet's key can make it. */
    private readonly keyNeeded: (payout: Payout) => void = () => {},
  ) {}

  /**
   * Follows a recorded transaction to its end as far as the chain allows now; true while it is not
   * mined (no other transaction of the wallet may be sent then).
   */
  async finish(payout: Payout): Promise<boolean> {
    let hash = payout.txHash as Hex
    let block = payout.blockNumber === null ? null : BigInt(payout.blockNumber)
    let state = payout.state
    if (state === 'pending') {
      const moved = await this.reorged(payout, block)
      if (moved === 'final') return false
      if (moved === 'dropped') {
        state = 'sending'
        block = null
      } else ({ hash, block } = moved)
    }
    if (state === 'sending') {
      const mined = await this.mined(payout)
      if (mined === 'failed') return false
      if (mined === 'unmined') return true
      hash = mined.hash
      block = mined.blockNumber
    }
    const head = await this.deps.chain.blockNumber()
    if (block === null || head - block + 1n < BigInt(this.deps.options.confirmations)) return false
    // Confirm only what the chain still holds where it was counted; a reorg since is the next
    // pass's to follow.
    const receipt = await this.deps.chain.receiptOnChain(hash)
    if (receipt?.status !== 'success' || receipt.blockNumber !== block) return false
    if (!this.paysOut(payout, hash, receipt)) return false
    await this.step(payout, { step: 'confirmed', blockNumber: receipt.blockNumber })
    this.deps.logger.info({ payout: payout.id, txHash: hash }, 'payout confirmed')
    return false
  }

  /**
   * A signed payout's transaction as the chain shows it now: the hash mined and its block
   * (recorded as included), 'failed' (reverted, or its nonce held by another transaction,
   * confirmed), or 'unmined': broadcast again (re-signed with a higher fee once it waited
   * bumpAfterMs, when the key is here) and not mined within receiptTimeoutMs, or mined by the
   * chain's word but not yet by every read.
   */
  private async mined(payout: Payout) {
    // Every hash signed at the nonce is a candidate; only one of them can ever be mined.
    let found = await this.receiptOfAny(payout.hashes)
    if (!found) {
      let hash = payout.txHash as Hex
      if ((await this.reads.nonce('latest')) > (payout.nonce ?? 0)) {
        const holder = await this.reads.nonceHolder(payout.nonce ?? 0, BigInt(payout.signedBlock ?? 0))
        if (!holder) return 'unmined' as const
        if (!payout.hashes.includes(holder.hash)) return this.nonceTaken(payout, holder)
        // mined by the block's word: its receipt is awaited like any other's
        hash = holder.hash
      } else if (Date.now() - payout.updatedAt >= this.deps.options.bumpAfterMs) {
        if (this.key) hash = (await this.bump(this.key, payout)).txHash as Hex
        else {
          this.keyNeeded(payout)
          await this.reads.broadcast(payout.rawTx as Hex)
        }
      } else await this.reads.broadcast(payout.rawTx as Hex)
      const receipt = await this.deps.chain.waitForReceipt(hash, this.deps.options.receiptTimeoutMs)
      if (!receipt || !(await this.deps.chain.onChain(receipt))) return 'unmined' as const
      found = { hash, receipt }
    }
    if (found.receipt.status === 'success' && !this.paysOut(payout, found.hash, found.receipt))
      return 'unmined' as const
    if (found.receipt.status === 'reverted') {
      if (!(await this.finallyReverted(payout, found.hash, found.receipt.blockNumber)))
        return 'unmined' as const
      await this.step(payout, { step: 'failed', error: `reverted in block ${found.receipt.blockNumber}` })
      return 'failed' as const
    }
    await this.step(payout, { step: 'included', txHash: found.hash, blockNumber: found.receipt.blockNumber })
    return { hash: found.hash, blockNumber: found.receipt.blockNumber }
  }

  /**
   * A revert is final once its block has its confirmations and still holds it reverted: a reorg
   * before then puts the same signed bytes back in the pool, where they may succeed. Until then
   * the payout is not failed, and its amount not payable again. Nor while the token's own logs hold
   * the payout's transfer: a receipt's status alone (an RPC can answer one it forged, block and
   * all) would make a paid amount payable again.
   */
  private async finallyReverted(payout: Payout, hash: Hex, blockNumber: bigint): Promise<boolean> {
    const head = await this.deps.chain.blockNumber()
    if (head - blockNumber + 1n < BigInt(this.deps.options.confirmations)) return false
    const again = await this.deps.chain.receiptOnChain(hash)
    if (again?.status !== 'reverted' || again.blockNumber !== blockNumber) return false
    const transfer = {
      from: payout.from as Address,
      to: payout.wallet as Address,
      value: BigInt(payout.amount),
    }
    const paid = await this.deps.chain.transferBy(payout.hashes, transfer, BigInt(payout.signedBlock ?? 0))
    if (!paid) return true
    this.deps.logger.error(
      { payout: payout.id, txHash: hash, transfer: paid },
      "payout receipt says reverted, but the token logged its transfer to the supplier's wallet; not failed",
    )
    return false
  }

  /**
   * Whether a successful receipt holds the transfer the payout signed: the token's Transfer of its
   * amount from the signing wallet to the supplier's. One that does not (an RPC answering another
   * transaction's receipt, or rewriting its logs) is no word that the payout was paid.
   */
  private paysOut(payout: Payout, hash: Hex, receipt: Receipt): boolean {
    const { token } = this.deps.chain
    const from = payout.from as Address
    if (hasTransfer(receipt, token, from, payout.wallet as Address, BigInt(payout.amount))) return true
    this.deps.logger.error(
      { payout: payout.id, txHash: hash },
      "payout receipt holds no transfer of its amount to the supplier's wallet; not taken as paid",
    )
    return false
  }

  private async receiptOfAny(hashes: Hex[]) {
    for (const hash of hashes) {
      const receipt = await this.deps.chain.receiptOnChain(hash)
      if (receipt) return { hash, receipt }
    }
    return null
  }

  /**
   * Another transaction of the wallet holds the payout's nonce: failed once that one has its
   * confirmations (the payout's own can then never be mined); until then 'unmined'.
   */
  private async nonceTaken(payout: Payout, holder: { hash: Hex; blockNumber: bigint }) {
    const head = await this.deps.chain.blockNumber()
    if (head - holder.blockNumber + 1n < BigInt(this.deps.options.confirmations)) return 'unmined' as const
    this.deps.logger.warn(
      { payout: payout.id, holder: holder.hash },
      'payout nonce held by another transaction',
    )
    await this.step(payout, { step: 'failed', error: 'its nonce was used by another transaction' })
    return 'failed' as const
  }

  /** Re-signs the payout at its nonce with a higher fee, records the hash, then broadcasts it. */
  private async bump(key: PayoutWallet, payout: Payout): Promise<Payout> {
    const bumped = await key.bump(payout.rawTx as Hex)
    // A replacement the wallet cannot pay for is refused by every node: recorded, it would only
    // raise the fee the next one must beat, pass after pass, past anything the wallet will hold.
    if ((await key.gasBalance()) < bumped.cost) {
      this.deps.logger.warn(
        { payout: payout.id, wallet: key.address },
        'payout wallet cannot pay a higher fee',
      )
      await this.reads.broadcast(payout.rawTx as Hex)
      return payout
    }
    const code = await this.step(payout, { step: 'bumped', txHash: bumped.txHash, rawTx: bumped.rawTx })
    if (code !== PayoutMoveCode.Moved) return payout
    await this.lease.check()
    const refused = await this.reads.broadcast(bumped.rawTx)
    this.deps.logger.info(
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

  /**
   * A pending payout as the chain holds it now: its block (another one after a reorg), 'dropped'
   * when a reorg took its transaction out (back to sending: the recorded bytes go out again), or
   * 'final' when it now reverts.
   */
  private async reorged(payout: Payout, block: bigint | null) {
    const hash = payout.txHash as Hex
    const receipt = await this.deps.chain.receiptOnChain(hash)
    if (!receipt) {
      // A receipt read that finds nothing may come from a node behind: the transaction left the
      // chain only when its nonce is no longer held by one of the payout's own hashes.
      const holder = await this.reads.nonceHolder(payout.nonce ?? 0, BigInt(payout.signedBlock ?? 0))
      if (holder && payout.hashes.includes(holder.hash)) {
        // the same hash, or (a reorg) another of its signings mined in its place
        if (holder.hash !== hash || holder.blockNumber !== block) {
          await this.step(payout, { step: 'included', txHash: holder.hash, blockNumber: holder.blockNumber })
        }
        return { hash: holder.hash, block: holder.blockNumber }
      }
      this.deps.logger.warn(
        { payout: payout.id, txHash: hash },
        'payout transaction left the chain; sending it again',
      )
      await this.step(payout, { step: 'dropped', txHash: hash })
      return 'dropped' as const
    }
    if (receipt.status === 'reverted') {
      // Not confirmed yet: it stays pending, and is never confirmed while it reverts.
      if (!(await this.finallyReverted(payout, hash, receipt.blockNumber)))
        return { hash, block: receipt.blockNumber }
      await this.step(payout, { step: 'failed', error: `reverted in block ${receipt.blockNumber}` })
      return 'final' as const
    }
    if (receipt.blockNumber !== block) {
      await this.step(payout, { step: 'included', txHash: hash, blockNumber: receipt.blockNumber })
    }
    return { hash, block: receipt.blockNumber }
  }

  /**
   * One step of the payout, recorded under the lease's lock; LockLost when the lock is gone,
   * OffPayoutChain when a step that ends the payout would be taken on another chain's word.
   */
  async step(payout: Payout, step: PayoutStep): Promise<PayoutMoveCode> {
    if (
      (step.step === 'failed' || step.step === 'confirmed') &&
      !(await onPayoutChain(this.deps.chain, this.deps.logger))
    )
      throw new OffPayoutChain()
    const code = await this.deps.store.move(payout.id, this.lease.wallet, this.lease.token, step)
    if (code === PayoutMoveCode.NotHolder) throw new LockLost()
    if (code < 0 && code !== PayoutMoveCode.Suspension)
      this.deps.logger.error({ payout: payout.id, step: step.step, code }, 'payout step refused')
    return code
  }
}

/** A payout wallet's sender lock while a pass holds it: renewed on a timer, checked before a broadcast. */
export class Lease {
  private readonly timer: ReturnType<typeof setInterval>
  private lost = false

  constructor(
    private readonly store: PayoutStore,
    /** The wallet whose lock this is (payout-move is fenced by it). */
    readonly wallet: string,
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
