// A set whose members one interval visits while it has any (and one period more): the way the
// process keeps one timer for many open streams (their silences, their leases) instead of a timer
// each.
import { type Every, onTimer } from './every.ts'

export class TickingSet<T> {
  private readonly members = new Set<T>()
  private stop: (() => void) | null = null

  constructor(
    private readonly periodMs: number,
    private readonly visit: (member: T, now: number) => unknown,
    private readonly every: Every = onTimer,
  ) {}

  add(member: T): void {
    this.members.add(member)
    if (this.stop) return
    this.stop = this.every(this.periodMs, () => this.visitAll())
  }

  /**
   * The interval outlives the last member by up to one period: stopped by the visit that finds
   * the set empty, not here, so that requests one after another (each added, then removed) do not
   * start and clear a timer each.
   */
  remove(member: T): void {
    this.members.delete(member)
  }

  /** Visits every member; settles once the visits that returned a promise have. */
  private visitAll(): Promise<unknown> | undefined {
    if (this.members.size === 0) {
      this.stop?.()
      this.stop = null
      return undefined
    }
    const now = Date.now()
    const pending: unknown[] = []
    for (const m of this.members) {
      const visited = this.visit(m, now)
      if (visited instanceof Promise) pending.push(visited)
    }
    return pending.length > 0 ? Promise.all(pending) : undefined
  }
}
