// One timer per process renews the leases of every stream it relays, in one pipelined batch,
// instead of a timer per stream: fewer timers and closures held per open stream, and one round
// trip for all of them. A lease lives as long as its stream; only a dead replica's are reaped.
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { type Every, onTimer } from '../timing/every.ts'
import { TickingSet } from '../timing/ticking-set.ts'
import { renewLease } from './leases.ts'

export class LeaseRenewer {
  // Auto-pipelining sends each round's renewals together; a lease already reaped simply is not renewed.
  private readonly open: TickingSet<string>

  constructor(store: Store, keys: Keyspace, leaseMs: number, every: Every = onTimer) {
    this.open = new TickingSet(
      Math.floor(leaseMs / 3),
      (id) => renewLease(store, keys, id, leaseMs).catch(() => {}),
      every,
    )
  }

  add(attemptId: string): void {
    this.open.add(attemptId)
  }

  remove(attemptId: string): void {
    this.open.remove(attemptId)
  }
}
