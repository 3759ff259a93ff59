// Every invariant of the store, read key after key: exact on a market at rest; `svc-gateway audit`
// reads each of its findings again before naming it (audit-live.ts).
import { auditFunding } from '../funding/audit.ts'
import { type AuditFinding, auditMarket } from '../market/audit.ts'
import { auditApart } from '../market/audit-apart.ts'
import { auditPayouts } from '../payouts/audit.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { auditSuppliers } from '../suppliers/audit.ts'

/**
 * Every invariant of the store: the market's, each supplier's, each supplier's payouts' and each
 * account's funding; held apart, every slot's and the pairs across them too. A finding two checks
 * make is named once.
 */
export async function auditAll(store: Store, keys: Keyspace): Promise<AuditFinding[]> {
  const findings = [
    ...(keys.layout === 'apart' ? await auditApart(store, keys.prefix) : []),
    ...(await auditMarket(store, keys)),
    ...(await auditSuppliers(store, keys)),
    ...(await auditPayouts(store, keys)),
    ...(await auditFunding(store, keys)),
  ]
  const named = new Set<string>()
  return findings.filter(({ subject, problem }) => {
    const line = `${subject}: ${problem}`
    return !named.has(line) && named.add(line)
  })
}
