// The offer's side of this replica's clears held apart, queued per offer: a post need not hold up
// the buyer's answer, nor cost a call of its own. The offer's next reservation from this replica
// carries the offer's queue (lua/reserve.lua applies it first, so the capacity it gives back counts
// for that reservation); an offer no reservation comes to within the bound is posted alone, all its
// queue in one call (lua/post.lua), and so is every offer's at close. A replica that dies with
// posts queued leaves them to reapOffer (two-phase.ts): once a reservation's lease runs out it is
// posted from its account's side, with what the account was charged.
import type { MicroDiem, MicroUsdc } from '../money/units.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'

/**
 * How long a queued post waits for a reservation to carry it (SVC_POST_WITHIN_MS's default): the
 * capacity it holds meanwhile is refused to other replicas' requests, so a few milliseconds.
 */
export const POST_WITHIN_MS = 2

/** What a clear billed, to post on its offer (at its ask, what a lost reservation is posted at). */
export interface Billed {
  burn: MicroDiem
  charged: MicroUsdc
  fee: MicroUsdc
  disputed: MicroDiem
  askCents: number
  /** The UTC day a balance after holds on, as the clear found it (Clearing's): without one, not known. */
  balanceDay?: number
  /** When the clear was (ms, Redis's clock): its fill counts then, however late it is posted. */
  clearedAt?: number
}

/**
 * One post's values, in lib/posts's order: a balance goes only with the day it holds on, and is
 * recorded only while the offer's upstream is still generation `upstreamGen` (unknown: never).
 */
export function postValues(
  attemptId: string,
  model: string,
  billed: Billed,
  upstreamBalance: MicroDiem | null,
  upstreamGen?: number,
): (string | number)[] {
  const { burn, charged, fee, disputed, askCents, balanceDay, clearedAt } = billed
  const known = upstreamBalance !== null && balanceDay !== undefined
  return [
    attemptId,
    burn,
    charged - fee,
    fee,
    disputed,
    known ? upstreamBalance : '',
    known ? balanceDay : '',
    askCents,
    model,
    upstreamGen ?? '',
    clearedAt ?? '',
  ]
}

/** An offer's queue, taken to be carried: its posts' values and the retention to keep them for. */
export interface Carried {
  values: (string | number)[]
  recordRetentionMs: number
}

export class PostQueue {
  private readonly queued = new Map<string, Carried>()
  private readonly timers = new Map<string, ReturnType<typeof setTimeout>>()
  /** Posts alone still on their way: close waits for them too. */
  private readonly sending = new Set<Promise<void>>()

  /** base: an offer's keyspace base, where its posts run. */
  constructor(
    private readonly store: Store,
    private readonly base: (offerId: string) => string,
    private readonly postWithinMs = POST_WITHIN_MS,
  ) {}

  add(offerId: string, values: (string | number)[], recordRetentionMs: number): void {
    const queue = this.queued.get(offerId)
    if (queue) {
      queue.values.push(...values)
      queue.recordRetentionMs = recordRetentionMs
    } else this.queued.set(offerId, { values: [...values], recordRetentionMs })
    if (!this.timers.has(offerId)) {
      const timer = setTimeout(() => this.postAlone(offerId), this.postWithinMs)
      timer.unref?.()
      this.timers.set(offerId, timer)
    }
  }

  /** The offer's queue, for a reservation to carry; null when none. */
  take(offerId: string): Carried | null {
    const queue = this.queued.get(offerId)
    if (!queue) return null
    this.queued.delete(offerId)
    clearTimeout(this.timers.get(offerId))
    this.timers.delete(offerId)
    return queue
  }

  /** Puts back what a reservation failed to carry (posts are idempotent: carried or not, post again). */
  putBack(offerId: string, carried: Carried): void {
    this.add(offerId, carried.values, carried.recordRetentionMs)
  }

  /** Posts every offer's queue now, and waits for those already on their way (at close). */
  async flush(): Promise<void> {
    for (const offerId of [...this.queued.keys()]) this.postAlone(offerId)
    await Promise.all(this.sending)
  }

  private postAlone(offerId: string): void {
    const carried = this.take(offerId)
    if (!carried) return
    const sent = this.send(offerId, carried).finally(() => this.sending.delete(sent))
    this.sending.add(sent)
  }

  private async send(offerId: string, carried: Carried): Promise<void> {
    try {
      await runScript(
        this.store,
        'post',
        [this.base(offerId)],
        { recordRetentionMs: carried.recordRetentionMs, offerId },
        carried.values,
      )
    } catch {
      // No caller waits on it: the offer's slot refused it for now (a failover, a slot moving) or
      // the store is closing. Each reservation's lease runs out and reapOffer posts it then.
    }
  }
}
