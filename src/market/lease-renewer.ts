// One timer per process renews the leases of every stream it relays, in one pipelined batch,
// instead of a timer per stream: fewer timers and closures held per open stream, and one round
// trip for all of them. A lease lives as long as its stream; only a dead replica's are reaped.
import type Redis from 'ioredis'
import type { Keyspace } from '../redis/keys.ts'
import { renewLease } from './settlement.ts'

export class LeaseRenewer {
  private readonly open = new Set<string>()
  private timer: Timer | null = null

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keyspace,
    private readonly leaseMs: number,
  ) {}

  add(attemptId: string): void {
    this.open.add(attemptId)
    if (this.timer) return
    this.timer = setInterval(() => this.renewAll(), Math.max(1_000, Math.floor(this.leaseMs / 3)))
    this.timer.unref()
  }

  remove(attemptId: string): void {
    this.open.delete(attemptId)
    if (this.open.size === 0 && this.timer) {
      clearInterval(this.timer)
      this.timer = null
    }
  }

  private renewAll(): void {
    // Auto-pipelining sends these together; a lease already reaped simply is not renewed.
    for (const id of this.open) renewLease(this.redis, this.keys, id, this.leaseMs).catch(() => {})
  }
}
