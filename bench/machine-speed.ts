// How fast this shared machine was during a run, so that runs on different days can be read side by
// side: the round trip of a sequential Redis PING from Bun (a wake-up on each side, nothing else),
// and the share of CPU time the hypervisor took from this machine (steal, from /proc/stat).
import { readFileSync } from 'node:fs'
import { RedisClient } from 'bun'
import { median } from './stats.ts'

/** Median of five rounds of 2,000 sequential PINGs, microseconds per round trip. */
export async function pingRoundTripUs(redisUrl: string): Promise<number> {
  const client = new RedisClient(redisUrl)
  try {
    await client.send('PING', [])
    const rounds: number[] = []
    for (let r = 0; r < 5; r++) {
      const start = performance.now()
      for (let i = 0; i < 2_000; i++) await client.send('PING', [])
      rounds.push(((performance.now() - start) * 1000) / 2_000)
    }
    return median(rounds)
  } finally {
    client.close()
  }
}

function cpuTimes(): { steal: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!
  const fields = line.trim().split(/\s+/).slice(1).map(Number)
  // user nice system idle iowait irq softirq steal guest guest_nice: guests are inside user already
  const total = fields.slice(0, 8).reduce((sum, n) => sum + n, 0)
  return { steal: fields[7] ?? 0, total }
}

/** Starts counting; the returned function gives the steal share since then, in percent. */
export function stealMeter(): () => number {
  const start = cpuTimes()
  return () => {
    const now = cpuTimes()
    const total = now.total - start.total
    return total > 0 ? (100 * (now.steal - start.steal)) / total : 0
  }
}
