// One timer per process renews the leases of every stream it relays, in one pipelined batch,
// instead of a timer per stream: fewer timers and closures held per open stream, and one round
// trip for all of them. A lease lives as long as its stream; only a dead replica's are reaped.
import { type Every, onTimer } from '../timing/every.ts'
import { TickingSet } from '../timing/ticking-set.ts'
import type { AttemptRef, MarketSteps } from './steps.ts'

export class LeaseRenewer {
  // Auto-pipelining sends each round's renewals together; a lease already reaped simply is not renewed.
  private readonly open: TickingSet<string>
  /** Each open attempt's owners: where its lease lives (its offer's slot, when held apart). */
  private readonly attempts = new Map<string, AttemptRef>()

  constructor(steps: MarketSteps, leaseMs: number, every: Every = onTimer) {
    this.open = new TickingSet(
      Math.floor(leaseMs / 3),
      (id) => {
        const attempt = this.attempts.get(id)
        return attempt && steps.renew(attempt, leaseMs).catch(() => {})
      },
      every,
    )
  }

  /** Admits sent and not yet answered. */
  private admitting = 0

  /**
   * Attempts this process has admitted and not yet ended, and admits it has in Redis: each attempt
   * is held from its admit's answer until its clear or release has returned (or given up), so none
   * is left when every one is settled.
   */
  get inFlight(): number {
    return this.attempts.size + this.admitting
  }

  /**
   * An admit, counted from its sending until it answers; the attempt it admitted (`admitted` names
   * it) is held from that answer on. A stop that cuts the request while Redis has its admit waits
   * for the admit and then for the attempt's release, as for any attempt it holds.
   */
  async admit<T>(sending: Promise<T>, admitted: (answer: T) => AttemptRef | null): Promise<T> {
    this.admitting += 1
    try {
      const answer = await sending
      const attempt = admitted(answer)
      if (attempt) this.add(attempt)
      return answer
    } finally {
      this.admitting -= 1
    }
  }

  add(attempt: AttemptRef): void {
    this.attempts.set(attempt.attemptId, attempt)
    this.open.add(attempt.attemptId)
  }

  remove(attemptId: string): void {
    this.attempts.delete(attemptId)
    this.open.remove(attemptId)
  }
}
