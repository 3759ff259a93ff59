// The payout sender and reconciler: one loop on every replica, doing work only while it holds the
// payout wallet's sender lock (lua/payout-lock.lua), so one transaction at a time leaves the
// wallet across replicas. Every step is recorded by lua/payout-move.lua with the lock's fencing
// token: a sender whose lock lapsed can record nothing, and so broadcasts nothing new.
//
// A pass, oldest payout first:
// - a payout with a recorded transaction (a crash, a receipt that did not come in time) is
//   finished: its receipt read, or its bytes broadcast again (the same hash: never paid twice),
//   or failed when another transaction took its nonce;
// - a pending payout with SVC_CONFIRMATIONS confirmations becomes confirmed;
// - then, when no transaction of the wallet is unmined, the oldest `sending` payout is signed at
//   the wallet's pending nonce, recorded (rawTx and hash) and only then broadcast.
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
      if (payout.rawTx) unmined = (await this.finish(lease, payout)) || unmined
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
    const nonce = await this.wallet.nonce('pending')
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
    if (
      (await this.step(lease, payout, { step: 'signed', from: this.wallet.address, ...signed })) !==
      PayoutMoveCode.Moved
    ) {
      return false
    }
    const recorded = { ...payout, from: this.wallet.address, ...signed }
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
    const hash = payout.txHash as Hex
    let block = payout.blockNumber === null ? null : BigInt(payout.blockNumber)
    if (payout.state === 'sending') {
      // The mined nonce is read before the receipt: a receipt missing after it means the
      // transaction was not mined when the nonce already counted another one.
      const mined = await this.wallet.nonce('latest')
      let receipt = await this.chain.receipt(hash)
      if (!receipt && mined > (payout.nonce ?? 0)) {
        await this.step(lease, payout, { step: 'failed', error: 'its nonce was used by another transaction' })
        return false
      }
      if (!receipt) {
        await this.wallet.broadcast(payout.rawTx as Hex)
        receipt = await this.chain.waitForReceipt(hash, this.options.receiptTimeoutMs)
        if (!receipt) return true
      }
      if (receipt.status === 'reverted') {
        await this.step(lease, payout, { step: 'failed', error: `reverted in block ${receipt.blockNumber}` })
        return false
      }
      block = receipt.blockNumber
      await this.step(lease, payout, { step: 'included', txHash: hash, blockNumber: block })
    }
    const head = await this.chain.blockNumber()
    if (block === null || head - block + 1n < BigInt(this.options.confirmations)) return false
    // A reorg could have dropped it: confirm only what the chain still holds.
    const receipt = await this.chain.receipt(hash)
    if (receipt?.status !== 'success') {
      this.logger.error(
        { payout: payout.id, txHash: hash },
        'included payout not on chain now; not confirmed',
      )
      return false
    }
    await this.step(lease, payout, { step: 'confirmed', blockNumber: receipt.blockNumber })
    this.logger.info({ payout: payout.id, txHash: hash }, 'payout confirmed')
    return false
  }

  private async step(lease: Lease, payout: Payout, step: PayoutStep): Promise<PayoutMoveCode> {
    const code = await this.store.move(payout.id, this.wallet.address, lease.token, step)
    if (code === PayoutMoveCode.NotHolder) throw new LockLost()
    if (code < 0) this.logger.error({ payout: payout.id, step: step.step, code }, 'payout step refused')
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
