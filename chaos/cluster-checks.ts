// What the Redis Cluster chaos files (cluster-failover, slot-move) share: a market on one slot
// served by `serve` replicas or held apart on a gateway in process, and the checks every run ends
// with.
import { expect } from 'bun:test'
import type { AuditFinding } from '../src/market/audit.ts'
import { auditApart } from '../src/market/audit-apart.ts'
import type { Store } from '../src/redis/store.ts'
import type { SimServer } from '../src/sim/server.ts'
import {
  apartGateway,
  type Buyer,
  fundedBuyer,
  type Outcome,
  type reconcile,
  runAudit,
  simOffer,
  startCluster,
} from './cluster.ts'

/** What a failover or a slot move may answer: 200, or 503 `store_unavailable` in the contract's shape. */
export const answeredCleanly = (o: Outcome) =>
  o.transport === null && (o.status === 200 || (o.status === 503 && o.error === 'store_unavailable'))

/** How many requests ended each way ("200", "503 store_unavailable", "200 TimeoutError"). */
export function answerCounts(outcomes: Outcome[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const o of outcomes) {
    const code = `${o.status} ${o.error ?? o.transport ?? ''}`.trim()
    counts[code] = (counts[code] ?? 0) + 1
  }
  return counts
}

/**
 * The end of every run: each request answered cleanly (answeredCleanly), no attempt left open,
 * every cost told what was charged, and what accounts spent what their cleared attempts charged
 * (nothing charged without a clear).
 */
export function expectCleanAndExact(
  outcomes: Outcome[],
  result: Awaited<ReturnType<typeof reconcile>>,
): void {
  expect(outcomes.filter((o) => !answeredCleanly(o))).toEqual([])
  expect(result.states.admitted ?? 0).toBe(0)
  expect(result.mismatches).toEqual([])
  expect(result.accountsSpent).toBe(result.totalCharged)
}

/** `svc-gateway audit`, the real CLI, finds nothing. */
export async function expectAuditClean(redisUrl: string, prefix: string): Promise<void> {
  const audit = await runAudit(redisUrl, prefix)
  expect(audit.output).toContain('every invariant holds')
  expect(audit.code).toBe(0)
}

/** auditApart's findings once every pair has finished (the reaper's work), or what is left at `ms`. */
export async function auditApartSettled(store: Store, prefix: string, ms: number): Promise<AuditFinding[]> {
  const deadline = Date.now() + ms
  let findings = await auditApart(store, prefix)
  while (findings.length > 0 && Date.now() < deadline) {
    await Bun.sleep(100)
    findings = await auditApart(store, prefix)
  }
  return findings
}

/** A gateway held apart on `redisUrl` with offers at 40 and 45 cents and `count` funded buyers. */
export async function apartMarket(redisUrl: string, count: number) {
  const { stack, gateways } = await apartGateway(redisUrl)
  await simOffer(gateways, stack.sim, 40)
  await simOffer(gateways, stack.sim, 45)
  const buyers: Buyer[] = await Promise.all(Array.from({ length: count }, () => fundedBuyer(gateways)))
  return { stack, gateways, buyers, prefix: stack.config.redisPrefix }
}

/** Two `serve` replicas on `redisUrl` (layout one-slot), offers at 40 and 45 cents, 4 funded buyers. */
export async function oneSlotMarket(redisUrl: string, sim: SimServer) {
  const gateways = await startCluster({ redisUrl, sim, replicas: 2 })
  await simOffer(gateways, sim, 40)
  await simOffer(gateways, sim, 45)
  const buyers: Buyer[] = await Promise.all([1, 2, 3, 4].map(() => fundedBuyer(gateways)))
  return { gateways, buyers }
}
