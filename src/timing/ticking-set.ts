// A set whose members one interval visits while it has any: the way the process keeps one timer
// for many open streams (their silences, their leases) instead of a timer each.
export class TickingSet<T> {
  private readonly members = new Set<T>()
  private timer: Timer | null = null

  constructor(
    private readonly periodMs: number,
    private readonly visit: (member: T, now: number) => void,
  ) {}

  add(member: T): void {
    this.members.add(member)
    if (this.timer) return
    this.timer = setInterval(() => {
      const now = Date.now()
      for (const m of this.members) this.visit(m, now)
    }, this.periodMs)
    this.timer.unref()
  }

  remove(member: T): void {
    this.members.delete(member)
    if (this.members.size === 0 && this.timer) {
      clearInterval(this.timer)
      this.timer = null
    }
  }
}
