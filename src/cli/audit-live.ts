// `svc-gateway audit` on a live market: the whole audit first (audit-all.ts), exact at rest, then
// each finding read again a few times, a moment apart, before it is named. What requests move on
// an account or an offer (its holds, in-flight counts, leases, a key's spent against its Stream)
// is read again at one instant on its slot (market/audit-slots.ts; held apart, with a pair across
// two slots by attempt id, market/audit-slots-apart.ts); a sum over many owners is bracketed by
// its growing sides (audit-sums.ts; held apart, across slots too); anything else by the whole
// audit again.
// Named is what every reading finds: a fault stays, what a request was in the middle of does not.
import type { AuditFinding } from '../market/audit.ts'
import { pairOf } from '../market/audit-pairs.ts'
import { readOwnersAgain, type Suspects } from '../market/audit-slots.ts'
import { readOwnersAgainApart } from '../market/audit-slots-apart.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { auditAll } from './audit-all.ts'
import { readSumsAgain, type Sums } from './audit-sums.ts'

export interface LiveOptions {
  /** Readings after the first: a finding must be in each. */
  rounds: number
  /** The pause before the first of them; each next one waits a pause longer. */
  pauseMs: number
}

const DEFAULTS: LiveOptions = { rounds: 3, pauseMs: 100 }

type Source = 'slots' | 'sums' | 'whole'

/** A finding with its amounts left out: what the next reading must find again, whatever moved. */
const kindOf = (f: AuditFinding) => `${f.subject}: ${f.problem.replace(/\d+/g, '#')}`

/**
 * An owner's checks only the whole audit makes (its hash missing, a pending payment; held apart,
 * its payments' and its keys' records on the market's slot).
 */
const WHOLE_ONLY =
  /^(listed but its hash is missing|pending \d+ != its payments pending|credited by hand|credited payment \S+ has no record|key \S+ (is listed but has no record|has a record but is not listed)|stands in )/

interface Plan {
  source: Map<string, Source>
  suspects: Suspects
  sums: Sums
}

/** Where each finding is read again. */
function planOf(findings: AuditFinding[], keys: Keyspace): Plan {
  const plan: Plan = {
    source: new Map(),
    suspects: { accounts: new Set(), offers: new Set(), attempts: new Set(), pairs: new Map() },
    sums: { market: false, writeOffs: false, funded: new Set(), suppliers: new Set() },
  }
  const { suspects, sums } = plan
  const apart = keys.layout === 'apart'
  for (const f of findings) {
    const [, kind, id, ofAccount] = /^(\S+) (\S+)(?: of account (\S+))?$/.exec(f.subject) ?? []
    let source: Source = 'whole'
    if (WHOLE_ONLY.test(f.problem)) source = 'whole'
    else if (f.subject === 'market') {
      source = 'sums'
      if (f.problem.startsWith('buyer spend')) sums.market = true
      else sums.writeOffs = true
    } else if (kind === 'supplier' && /^fills earned \d+ != its offers' earned/.test(f.problem)) {
      source = 'sums'
      sums.suppliers.add(id!)
    } else if (apart && kind === 'attempt') {
      const at = pairOf.get(f)
      source = at ? 'slots' : 'whole'
      if (at) suspects.pairs.set(id!, at)
    } else if (kind === 'account' && /^funded \d+ != its credited payments/.test(f.problem)) {
      source = 'sums'
      sums.funded.add(id!)
    } else if (kind === 'account' || (kind === 'key' && ofAccount)) {
      source = 'slots'
      suspects.accounts.add(ofAccount ?? id!)
    } else if (kind === 'offer') {
      source = 'slots'
      suspects.offers.add(id!)
    } else if (kind === 'lease' || (kind === 'attempt' && f.problem === 'admitted but has no lease')) {
      source = 'slots'
      suspects.attempts.add(id!)
    }
    plan.source.set(kindOf(f), source)
  }
  return plan
}

const readSlotsAgain = (store: Store, keys: Keyspace, suspects: Suspects) =>
  keys.layout === 'apart'
    ? readOwnersAgainApart(store, keys, suspects)
    : readOwnersAgain(store, keys, suspects)

/** One reading of what the plan names, each finding from the source planned for it. */
async function readAgain(store: Store, keys: Keyspace, plan: Plan): Promise<AuditFinding[]> {
  const wants = (source: Source) => [...plan.source.values()].includes(source)
  const from = (source: Source, found: AuditFinding[]) =>
    found.filter((f) => plan.source.get(kindOf(f)) === source)
  return [
    ...(wants('slots') ? from('slots', await readSlotsAgain(store, keys, plan.suspects)) : []),
    ...(wants('sums') ? from('sums', await readSumsAgain(store, keys, plan.sums)) : []),
    ...(wants('whole') ? from('whole', await auditAll(store, keys)) : []),
  ]
}

/**
 * The findings every reading makes, in the whole audit's order and the last reading's words: on
 * a market at rest, exactly the whole audit's.
 */
export async function auditLive(
  store: Store,
  keys: Keyspace,
  options: LiveOptions = DEFAULTS,
): Promise<AuditFinding[]> {
  const first = await auditAll(store, keys)
  if (first.length === 0) return first
  const plan = planOf(first, keys)
  let standing = new Set(first.map(kindOf))
  let last = first
  for (let round = 1; round <= options.rounds && standing.size > 0; round++) {
    await Bun.sleep(options.pauseMs * round)
    last = await readAgain(store, keys, plan)
    const found = new Set(last.map(kindOf))
    standing = new Set([...standing].filter((kind) => found.has(kind)))
  }
  const words = new Map<string, AuditFinding[]>()
  for (const f of last) words.set(kindOf(f), [...(words.get(kindOf(f)) ?? []), f])
  return first.flatMap((f) => (standing.has(kindOf(f)) ? (words.get(kindOf(f))?.shift() ?? []) : []))
}
