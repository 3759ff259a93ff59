// The audit's checks of one account (its money, its in-flight counts, its keys) and of one offer
// against the open attempts read with them. Pure, so that the audit of the whole keyspace
// (audit.ts) and the live audit's consistent reads of a slot (audit-slots.ts) name a fault in the
// same words.
import type { AuditFinding } from './audit.ts'

/** What the open attempts hold and count, by account, by `<account>|<key>`, by offer. */
export interface OpenTallies {
  heldByAccount: Map<string, number>
  heldByKey: Map<string, number>
  heldByOffer: Map<string, number>
  slotsByOffer: Map<string, number>
  /** `<account>|inflight`, `<account>|inflight:<key>`, `<account>|group:<name>` */
  inflight: Map<string, number>
}

const MONEY_FIELDS = ['confirmed', 'pending', 'held', 'spent', 'funded', 'writtenOff'] as const
const IN_FLIGHT_FIELD = /^(inflight(:.+)?|group:.+)$/
const KEY_FIELD = /^(limit|spent|held|reset|pspent):(.+)$/

const num = (row: Record<string, string>, field: string) => Number(row[field] ?? 0)

/** The tallies of admitted attempts (rows as attemptFields reads them). */
export function tallyOpen(open: Record<string, string>[]): OpenTallies {
  const t: OpenTallies = {
    heldByAccount: new Map(),
    heldByKey: new Map(),
    heldByOffer: new Map(),
    slotsByOffer: new Map(),
    inflight: new Map(),
  }
  const add = (map: Map<string, number>, key: string, amount: number) =>
    map.set(key, (map.get(key) ?? 0) + amount)
  for (const a of open) {
    add(t.heldByAccount, a.accountId!, num(a, 'holdUsdc'))
    add(t.heldByKey, `${a.accountId}|${a.keyId}`, num(a, 'holdUsdc'))
    add(t.heldByOffer, a.offerId!, num(a, 'holdDiem'))
    add(t.slotsByOffer, a.offerId!, 1)
    add(t.inflight, `${a.accountId}|inflight`, 1)
    add(t.inflight, `${a.accountId}|inflight:${a.keyId}`, 1)
    if (a.capGroup) add(t.inflight, `${a.accountId}|group:${a.capGroup}`, 1)
  }
  return t
}

/**
 * An account's hash: its money fields whole and at or above zero; on one slot, funded = confirmed
 * + pending + held + spent and held = its open attempts' holds (held apart, audit-apart.ts checks
 * both); its in-flight counts equal to its open attempts. `row` has an id (a listed account without
 * a hash is the caller's finding).
 */
export function accountFindings(row: Record<string, string>, t: OpenTallies, apart: boolean): AuditFinding[] {
  const findings: AuditFinding[] = []
  const subject = `account ${row.id}`
  const off = (problem: string) => findings.push({ subject, problem })
  for (const field of MONEY_FIELDS) {
    const value = num(row, field)
    if (!Number.isSafeInteger(value)) off(`${field} is not an integer: ${row[field]}`)
    else if (value < 0) off(`${field} is below zero: ${value}`)
  }
  const sum = num(row, 'confirmed') + num(row, 'pending') + num(row, 'held') + num(row, 'spent')
  if (!apart && sum !== num(row, 'funded'))
    off(`funded ${num(row, 'funded')} != confirmed + pending + held + spent ${sum}`)
  const held = t.heldByAccount.get(row.id!) ?? 0
  if (!apart && num(row, 'held') !== held)
    off(`held ${num(row, 'held')} != holds of its open attempts ${held}`)
  // Its in-flight counts (inflight, inflight:<keyId>, group:<name>) are its open attempts.
  for (const [field, value] of Object.entries(row)) {
    if (!IN_FLIGHT_FIELD.test(field)) continue
    const open = t.inflight.get(`${row.id}|${field}`) ?? 0
    if (Number(value) !== open) off(`${field} ${value} != its open attempts ${open}`)
  }
  for (const [counted, open] of t.inflight) {
    const [accountId, field] = counted.split('|') as [string, string]
    if (accountId === row.id && row[field] === undefined) off(`${field} missing; ${open} open attempts`)
  }
  return findings
}

/**
 * Per API key of an account (the account hash's limit:/spent:/held:<keyId> fields): what it holds
 * is what its open attempts hold; what it spent never passes its limit (a periodic limit's: what
 * it spent in the period it last counted, reset:/pspent:<keyId>); and what it spent is what its
 * ended attempts were charged (`charged`, summed over the account's ended-attempt Stream): equal
 * while the Stream holds every entry it was given (`complete`), at most the key's spent once older
 * entries were trimmed.
 */
export function keyFindings(
  accountId: string,
  row: Record<string, string>,
  heldByKey: Map<string, number>,
  charged: Map<string, number>,
  complete: boolean,
): AuditFinding[] {
  const findings: AuditFinding[] = []
  type KeyRow = { limit: number | null; spent: number; held: number; reset: string | null; pspent: number }
  const perKey = new Map<string, KeyRow>()
  const of = (keyId: string) => {
    const k = perKey.get(keyId) ?? { limit: null, spent: 0, held: 0, reset: null, pspent: 0 }
    perKey.set(keyId, k)
    return k
  }
  for (const [field, value] of Object.entries(row)) {
    const match = KEY_FIELD.exec(field)
    if (!match) continue
    const k = of(match[2]!)
    if (match[1] === 'limit') k.limit = Number(value)
    else if (match[1] === 'reset') k.reset = value
    else k[match[1] as 'spent' | 'held' | 'pspent'] = Number(value)
  }
  for (const [whose] of heldByKey) {
    const [account, keyId] = whose.split('|')
    if (account === accountId) of(keyId!)
  }
  for (const keyId of charged.keys()) of(keyId)
  for (const [keyId, k] of perKey) {
    const subject = `key ${keyId} of account ${accountId}`
    const off = (problem: string) => findings.push({ subject, problem })
    for (const [field, value] of [
      ['spent', k.spent],
      ['held', k.held],
      ['period spent', k.pspent],
      ['limit', k.limit ?? 0],
    ] as const) {
      if (!Number.isSafeInteger(value) || value < 0)
        off(`${field} is not a whole amount at or above zero: ${value}`)
    }
    const open = heldByKey.get(`${accountId}|${keyId}`) ?? 0
    if (k.held !== open) off(`held ${k.held} != holds of its open attempts ${open}`)
    if (k.limit !== null && k.reset === null && k.spent > k.limit)
      off(`spent ${k.spent} is above its limit ${k.limit}`)
    if (k.limit !== null && k.reset !== null && k.pspent > k.limit)
      off(`spent ${k.pspent} in its ${k.reset} period is above its limit ${k.limit}`)
    const sum = charged.get(keyId) ?? 0
    if (complete && sum !== k.spent) off(`spent ${k.spent} != its attempts' charges ${sum}`)
    if (!complete && sum > k.spent) off(`its retained attempts' charges ${sum} exceed its spent ${k.spent}`)
  }
  return findings
}

/**
 * An offer's hash: burned never above posted, nothing below zero; on one slot its held and in-flight
 * count are its open attempts' (held apart, an offer holds its reservations: audit-apart.ts).
 * `row` has an id.
 */
export function offerFindings(row: Record<string, string>, t: OpenTallies, apart: boolean): AuditFinding[] {
  const findings: AuditFinding[] = []
  const off = (problem: string) => findings.push({ subject: `offer ${row.id}`, problem })
  // Held apart, a late clear's burn (its capacity went back before it came) may pass capacity; it
  // is recorded as such (lib/posts.lua lateBurned).
  if (num(row, 'burned') > num(row, 'capacity') + num(row, 'lateBurned'))
    off(`burned ${row.burned} exceeds capacity ${row.capacity} (late ${row.lateBurned ?? 0})`)
  for (const field of ['burned', 'held', 'inflight', 'earned', 'fees']) {
    if (num(row, field) < 0) off(`${field} is below zero: ${row[field]}`)
  }
  if (apart) return findings
  const held = t.heldByOffer.get(row.id!) ?? 0
  if (num(row, 'held') !== held) off(`held ${num(row, 'held')} != holds of its open attempts ${held}`)
  const slots = t.slotsByOffer.get(row.id!) ?? 0
  if (num(row, 'inflight') !== slots) off(`inflight ${num(row, 'inflight')} != its open attempts ${slots}`)
  return findings
}

/**
 * Held apart, an account's own sum and its holds: funded = confirmed + pending + held + spent, and
 * held = its admitted attempts' holds (`heldByAccount`, by account id).
 */
export function apartAccountFindings(row: Record<string, string>, heldByAccount: Map<string, number>) {
  const findings: AuditFinding[] = []
  const off = (problem: string) => findings.push({ subject: `account ${row.id}`, problem })
  const sum = num(row, 'confirmed') + num(row, 'pending') + num(row, 'held') + num(row, 'spent')
  if (sum !== num(row, 'funded')) off(`funded ${row.funded} != confirmed + pending + held + spent ${sum}`)
  const held = heldByAccount.get(row.id!) ?? 0
  if (num(row, 'held') !== held) off(`held ${row.held} != holds of its admitted attempts ${held}`)
  return findings
}

/** Held apart, an offer holds and counts exactly its pending reservations. */
export function apartOfferFindings(row: Record<string, string>, pending: { held: number; slots: number }) {
  const findings: AuditFinding[] = []
  const off = (problem: string) => findings.push({ subject: `offer ${row.id}`, problem })
  if (num(row, 'held') !== pending.held) off(`held ${row.held} != its pending reservations ${pending.held}`)
  if (num(row, 'inflight') !== pending.slots)
    off(`inflight ${row.inflight} != its pending reservations ${pending.slots}`)
  return findings
}
