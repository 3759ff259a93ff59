// Order statistics for the benchmark: nearest-rank percentiles, medians across rounds.

/** The p-th percentile (0..100) of the values, by nearest rank; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const rank = Math.ceil((p / 100) * sorted.length)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!
}

export const median = (values: readonly number[]) => percentile(values, 50)

export const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0)

/** The targets in round `round`'s order: rotated one place a round, so no target always runs first. */
export const inRoundOrder = <T>(list: readonly T[], round: number): T[] =>
  list.map((_, i) => list[(i + round) % list.length]!)
