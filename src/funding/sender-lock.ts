// The relayer's turn across replicas. Every replica may be given the same relayer key (one config
// for all): each counting its own nonces, two would sign at the same nonce, and one transfer would
// never be mined. A send holds the wallet's sender lock (lua/payout-lock.lua, keyed by its address;
// the payout wallet is another key, config.ts refuses the same), and takes its nonce no lower than
// the one after the last send any replica made from it: a node answering the pending count from
// behind cannot hand out a nonce again. A transaction dropped from the pool leaves its nonce empty
// below that floor, and steady traffic keeps the floor standing: its signed bytes are kept, so
// while the floor stands the next send broadcasts them again (the same transaction, never a second
// one), or, refused for a fee under today's base fee, the same call signed again at its nonce.
// Beside the bytes, when each was broadcast or last signed again, until seen mined: whichever
// replica holds the turn raises the fee of one left unmined, or cancels it (src/funding/unmined.ts),
// its sender alive or dead.
import { randomBytes } from 'node:crypto'
import type { Address, Hex } from 'viem'
import type { Keyspace } from '../redis/keys.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'

/** The lock, held: the lowest nonce the send may use, and what it says when done. */
export interface HeldTurn {
  floor: number
  /** Whether the turn is still this send's (renewed now): false once it lapsed to another. */
  held(): Promise<boolean>
  /** The send was broadcast at `nonce`: the next one starts after it, its bytes kept to resend. */
  sent(nonce: number, serialized: Hex): Promise<void>
  /**
   * The send at `nonce` was signed again and broadcast (or broadcast unanswered): its new bytes are
   * kept in place of the old, unmined since now.
   */
  signedAgain(nonce: number, serialized: Hex): Promise<void>
  /** The bytes kept of the sends broadcast at `from` and after, lowest nonce first. */
  signedFrom(from: number): Promise<Hex[]>
  release(): Promise<void>
}

export interface SendTurns {
  /** Waits for the wallet's turn; throws when another sender keeps it past the wait. */
  take(): Promise<HeldTurn>
  /** When each send not seen mined was broadcast or last signed again (unix ms), by nonce. */
  unmined(): Promise<Map<number, number>>
  /** The sends below `count` (the key's mined count) were mined: they are unmined no longer. */
  mined(count: number): Promise<void>
}

/**
 * A send is a gas estimate, a signature and a broadcast, but each is an RPC call that may be slow
 * (viem retries each): the lock is renewed while the send runs, so only a dead replica's lapses.
 */
const LOCK_TTL_MS = 30_000
const FLOOR_TTL_MS = 60_000
/**
 * How long the bytes and times are kept past their last write: longer than an authorization lives
 * (SVC_X402_MAX_TIMEOUT_SECONDS, at most a day), so a send left unmined is there to cancel.
 */
const KEPT_TTL_MS = 7 * 24 * 3_600_000
const RETRY_MS = 10
/** Sends whose bytes are kept: a gap further back than this is left to the floor's lapse. */
const KEPT = 64

export class SenderTurns implements SendTurns {
  private readonly wallet: string

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    address: Address,
    private readonly waitMs = 15_000,
    private readonly ttlMs = LOCK_TTL_MS,
  ) {
    this.wallet = address.toLowerCase()
  }

  private lock(action: 'acquire' | 'renew' | 'release', token: string): Promise<boolean> {
    return runScript(this.store, 'payoutLock', [this.keys.base], {
      action,
      wallet: this.wallet,
      token,
      ttlMs: this.ttlMs,
    }).then((reply) => Number((reply as number[])[0]) === 1)
  }

  async unmined(): Promise<Map<number, number>> {
    const times = await this.store.hgetall(this.keys.relayerUnmined(this.wallet))
    return new Map(Object.entries(times).map(([nonce, at]) => [Number(nonce), Number(at)]))
  }

  async mined(count: number): Promise<void> {
    const key = this.keys.relayerUnmined(this.wallet)
    const below = (await this.store.hkeys(key)).filter((nonce) => Number(nonce) < count)
    if (below.length > 0) await this.store.hdel(key, ...below)
  }

  async take(): Promise<HeldTurn> {
    const token = randomBytes(16).toString('hex')
    const until = Date.now() + this.waitMs
    while (!(await this.lock('acquire', token))) {
      if (Date.now() >= until) throw new Error('another replica holds the relayer key past the wait')
      await Bun.sleep(RETRY_MS)
    }
    const floorKey = this.keys.relayerNextNonce(this.wallet)
    const sentKey = this.keys.relayerSent(this.wallet)
    const unminedKey = this.keys.relayerUnmined(this.wallet)
    // The bytes and the time they were broadcast, written together.
    const keep = (nonce: number, serialized: Hex, stale: string[] = []) => {
      const write = this.store
        .multi()
        .hset(sentKey, String(nonce), serialized)
        .hset(unminedKey, String(nonce), String(Date.now()))
      if (stale.length > 0) write.hdel(sentKey, ...stale).hdel(unminedKey, ...stale)
      return write.pexpire(sentKey, KEPT_TTL_MS).pexpire(unminedKey, KEPT_TTL_MS).exec()
    }
    let floor: number
    try {
      floor = Number((await this.store.get(floorKey)) ?? 0)
    } catch (error) {
      await this.lock('release', token).catch(() => {})
      throw error
    }
    // Renewed while the send runs; once another holds it, never ours again for this send.
    let lost = false
    const renew = async () => {
      lost ||= !(await this.lock('renew', token))
      return !lost
    }
    const heartbeat = setInterval(() => renew().catch(() => {}), Math.max(1, Math.floor(this.ttlMs / 3)))
    heartbeat.unref()
    return {
      floor,
      // An unanswered renewal is not a turn known to be held.
      held: () => renew().catch(() => false),
      sent: async (nonce, serialized) => {
        await this.store.set(floorKey, String(nonce + 1), 'PX', FLOOR_TTL_MS)
        // Every one KEPT back or further, not only the one at nonce - KEPT: a send whose broadcast
        // went unanswered (the node took it) was never noted, nor is the one KEPT before it deleted.
        const stale = (await this.store.hkeys(sentKey)).filter((kept) => Number(kept) <= nonce - KEPT)
        await keep(nonce, serialized, stale)
      },
      signedAgain: async (nonce, serialized) => {
        await keep(nonce, serialized)
      },
      signedFrom: async (from) =>
        Object.entries(await this.store.hgetall(sentKey))
          .map(([nonce, serialized]) => [Number(nonce), serialized as Hex] as const)
          .filter(([nonce]) => nonce >= from)
          .sort(([a], [b]) => a - b)
          .map(([, serialized]) => serialized),
      release: async () => {
        clearInterval(heartbeat)
        await this.lock('release', token)
      },
    }
  }
}
