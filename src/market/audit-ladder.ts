// On one slot, where each offer stands (lua/lib/ladder.lua): on the ladder iff it is active, its
// supplier is not suspended, it is under its in-flight cap and not dry (less left than the market's
// minimum); in the dry set iff active and dry; in the full set iff active, at its cap and not dry;
// in no set otherwise; in capacity tier t iff on the ladder with at least TIER_FLOORS[t] not yet
// burned. Held apart only the ladder exists, and the view's walk is in the gateway.
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import type { AuditFinding } from './audit.ts'

/** lua/lib/ladder.lua's DRY_CAP: the minimum is never read above it. */
const DRY_CAP = 1_000_000
/** lua/lib/ladder.lua's TIER_FLOORS: the capacity not yet burned each tier asks of its offers. */
const TIER_FLOORS = [40_000, 160_000, 640_000]

type Place = 'the ladder' | 'the full set' | 'the dry set' | 'no set'

/** The standing offers' places against what their rows say. `offers`: every offer's hash. */
export async function ladderFindings(
  store: Store,
  keys: Keyspace,
  offers: Record<string, string>[],
): Promise<AuditFinding[]> {
  if (keys.layout === 'apart') return []
  const [ladder, full, dry, floorRaw, ...tiers] = await Promise.all([
    store.zrange(keys.ladder, 0, -1),
    store.zrange(keys.full, 0, -1),
    store.zrange(keys.dry, 0, -1),
    store.hget(keys.market, 'minRoutable'),
    ...keys.tiers.map((tier) => store.zrange(tier, 0, -1)),
  ])
  const floor = Math.min(Number(floorRaw ?? 0), DRY_CAP)
  const places = new Map<string, Place[]>()
  const put = (ids: string[], place: Place) => {
    for (const id of ids) places.set(id, [...(places.get(id) ?? []), place])
  }
  put(ladder, 'the ladder')
  put(full, 'the full set')
  put(dry, 'the dry set')
  const inTiers = new Map<string, number[]>()
  tiers.forEach((ids, t) => {
    for (const id of ids) inTiers.set(id, [...(inTiers.get(id) ?? []), t + 1])
  })
  const suspended = new Map<string, boolean>()
  const findings: AuditFinding[] = []
  for (const row of offers) {
    if (!row.id) continue
    const num = (field: string) => Number(row[field] ?? 0)
    let standing = row.status === 'active'
    if (standing && row.supplierId) {
      if (!suspended.has(row.supplierId))
        suspended.set(
          row.supplierId,
          (await store.hget(keys.supplier(row.supplierId), 'status')) === 'suspended',
        )
      standing = !suspended.get(row.supplierId)
    }
    let want: Place = 'no set'
    if (standing) {
      if (num('capacity') - num('burned') - num('held') < floor) want = 'the dry set'
      else if (num('inflight') >= num('maxInFlight')) want = 'the full set'
      else want = 'the ladder'
    }
    const found = places.get(row.id) ?? ['no set']
    places.delete(row.id)
    if (found.length !== 1 || found[0] !== want)
      findings.push({
        subject: `offer ${row.id}`,
        problem: `stands in ${found.join(' and ')} where its row says ${want}`,
      })
    const unburned = num('capacity') - num('burned')
    const wantTiers = want === 'the ladder' ? TIER_FLOORS.filter((floor) => unburned >= floor).length : 0
    const foundTiers = inTiers.get(row.id) ?? []
    inTiers.delete(row.id)
    if (foundTiers.join() !== Array.from({ length: wantTiers }, (_, t) => t + 1).join())
      findings.push({
        subject: `offer ${row.id}`,
        problem: `stands in capacity tiers [${foundTiers.join(', ')}] where its row says ${wantTiers ? `1 to ${wantTiers}` : 'none'}`,
      })
  }
  for (const id of new Set([...places.keys(), ...inTiers.keys()]))
    findings.push({ subject: `offer ${id}`, problem: 'stands in a ladder set but has no hash' })
  return findings
}
