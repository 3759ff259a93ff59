// Counts of what is in flight per owner (a wallet) in this process, each under a cap: past it, the
// owner's next one is refused rather than queued without end.

export class InFlightCounts {
  private readonly counts = new Map<string, number>()

  /** Counts one more for `owner`, or false (nothing counted) when it has `cap` already. */
  enter(owner: string, cap: number): boolean {
    const count = this.counts.get(owner) ?? 0
    if (count >= cap) return false
    this.counts.set(owner, count + 1)
    return true
  }

  leave(owner: string): void {
    const count = (this.counts.get(owner) ?? 1) - 1
    if (count <= 0) this.counts.delete(owner)
    else this.counts.set(owner, count)
  }
}
