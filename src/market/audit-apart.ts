// The audit of a market held apart (two-phase.ts): every owner's slot on its own, and the pairs
// across slots by attempt id. A reservation pending on an offer is an attempt admitted on its
// account, and the other way round; a posted reservation is a cleared attempt with the same burn,
// and what the supplier earned plus the fee is what the account was charged; an offer holds and
// counts exactly its pending reservations, an account exactly its admitted attempts. Summed over
// the market, what buyers paid is what suppliers earned plus fees plus what is in transit (charged
// on the account, not yet posted on the offer). A payment recorded on the indexes' slot is credited
// once on its account's, in the same state, and an account's pending is what its payments there
// still have pending, every key listed on an account has the record auth reads and every record is
// of a listed key; and each supplier's offers, earnings, payouts and upstream key claims
// (audit-suppliers.ts).
// Read without a snapshot: exact at rest; `svc-gateway audit` reads each finding again before it
// names it (cli/audit-live.ts).
import { attemptFields } from '../records/attempt-fields.ts'
import type { Store } from '../redis/store.ts'
import { type AuditFinding, marketGlob, ownerGlob, scanHashes } from './audit.ts'
import { apartAccountFindings, apartOfferFindings } from './audit-owners.ts'
import { type PairAt, pairOf, pairProblems } from './audit-pairs.ts'
import { auditSuppliersApart } from './audit-suppliers.ts'

/** The id at the end of a key, after `marker`. */
const idAfter = (key: string, marker: string) => key.slice(key.lastIndexOf(marker) + marker.length)

export async function auditApart(store: Store, prefix: string): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  const off = (subject: string, problem: string) => findings.push({ subject, problem })
  const num = (row: Record<string, string> | undefined, field: string) => Number(row?.[field] ?? 0)

  // One attempt id may have reservations on more than one offer (a reservation whose reply was
  // lost, the request then reserved on the next offer under the same id): each is paired with the
  // account's attempt only when that attempt names its offer.
  const reservations: [string, Record<string, string>][] = []
  const reservedOn = new Set<string>()
  for (const { key, row } of await scanHashes(store, ownerGlob(prefix, 'o', 'reservation:*'), true)) {
    const id = idAfter(key, ':reservation:')
    reservations.push([id, row])
    reservedOn.add(`${row.offerId} ${id}`)
  }
  const attempts = new Map<string, Record<string, string>>()
  for (const { key, row } of await scanHashes(store, ownerGlob(prefix, 'a', 'attempt:*'), true))
    attempts.set(idAfter(key, ':attempt:'), attemptFields(row))

  // Pairs by attempt id.
  let inTransit = 0
  const heldByOffer = new Map<string, number>()
  const slotsByOffer = new Map<string, number>()
  const heldByAccount = new Map<string, number>()
  const pairOff = (id: string, at: PairAt, problems: string[]) => {
    for (const problem of problems) {
      const finding = { subject: `attempt ${id}`, problem }
      pairOf.set(finding, at)
      findings.push(finding)
    }
  }
  for (const [id, r] of reservations) {
    const held = attempts.get(id)
    const a = held?.offerId === r.offerId ? held : undefined
    if (r.state === 'reserved') {
      heldByOffer.set(r.offerId!, (heldByOffer.get(r.offerId!) ?? 0) + num(r, 'holdDiem'))
      slotsByOffer.set(r.offerId!, (slotsByOffer.get(r.offerId!) ?? 0) + 1)
      if (a?.state === 'cleared') inTransit += num(a, 'costUsdc')
    }
    pairOff(id, { accountId: r.accountId!, offerId: r.offerId! }, pairProblems(r, a))
  }
  for (const [id, a] of attempts) {
    if (a.state === 'admitted')
      heldByAccount.set(a.accountId!, (heldByAccount.get(a.accountId!) ?? 0) + num(a, 'holdUsdc'))
    if (!reservedOn.has(`${a.offerId} ${id}`))
      pairOff(id, { accountId: a.accountId!, offerId: a.offerId! }, pairProblems(undefined, a))
  }

  // Payments: recorded on the indexes' slot, each credited once on its account's.
  const credited = new Map<string, Record<string, string>>()
  for (const { key, row } of await scanHashes(store, ownerGlob(prefix, 'a', 'acct:*:payments'), true))
    credited.set(key.slice(key.lastIndexOf(':acct:') + 6, -':payments'.length), row)
  const pendingByAccount = new Map<string, number>()
  const recorded = new Set<string>()
  for (const p of await scanHashes(store, marketGlob(prefix, 'x402:payment:*'))) {
    const subject = `payment ${p.id}`
    recorded.add(`${p.accountId} ${p.id}`)
    const side = credited.get(p.accountId!)?.[p.id!]
    if (side === undefined) off(subject, `recorded ${p.state} but not credited to account ${p.accountId}`)
    else if (p.state === 'confirmed' && side !== 'confirmed')
      off(subject, 'confirmed but pending on its account')
    else if (p.state === 'pending' && side === 'confirmed')
      off(subject, 'confirmed on its account, not marked')
    if (side === 'pending')
      pendingByAccount.set(p.accountId!, (pendingByAccount.get(p.accountId!) ?? 0) + num(p, 'amount'))
  }
  // A payment moved to another transaction, or taken back, stays listed as such: its record is gone.
  for (const [accountId, row] of credited)
    for (const [id, side] of Object.entries(row))
      if (side !== 'moved' && side !== 'taken back' && !recorded.has(`${accountId} ${id}`))
        off(`account ${accountId}`, `credited payment ${id} has no record`)

  // Keys: each listed on its account has the record auth reads (a mint or a revoke that stopped
  // between its two steps leaves a listed key that does not work), and each record is of a key
  // listed on its account (one that is not is a revoked key that still works).
  const listed = new Set<string>()
  for (const { key, row } of await scanHashes(store, ownerGlob(prefix, 'a', 'acct:*:keys'), true)) {
    const accountId = key.slice(key.lastIndexOf(':acct:') + 6, -':keys'.length)
    const ids = Object.keys(row)
    const records = await Promise.all(ids.map((id) => store.hget(`${prefix}:apikey:${row[id]}`, 'id')))
    ids.forEach((id, i) => {
      listed.add(`${accountId} ${id} ${row[id]}`)
      if (records[i] !== id)
        off(`account ${accountId}`, `key ${id} is listed but has no record: it does not work`)
    })
  }
  for (const { key, row } of await scanHashes(store, marketGlob(prefix, 'apikey:*'), true))
    if (!listed.has(`${row.accountId} ${row.id} ${idAfter(key, ':apikey:')}`))
      off(`account ${row.accountId}`, `key ${row.id} has a record but is not listed: revoked, it still works`)

  // Each offer holds and counts its pending reservations; each account its admitted attempts.
  let earned = 0
  const offers: Record<string, string>[] = []
  for (const { row: o } of await scanHashes(store, ownerGlob(prefix, 'o', 'offer:*'), true)) {
    offers.push(o)
    const pending = { held: heldByOffer.get(o.id!) ?? 0, slots: slotsByOffer.get(o.id!) ?? 0 }
    findings.push(...apartOfferFindings(o, pending))
    earned += num(o, 'earned') + num(o, 'fees') - num(o, 'uncovered')
  }
  let spent = 0
  for (const { key, row: a } of await scanHashes(store, ownerGlob(prefix, 'a', 'acct:*'), true)) {
    if (!/:acct:[^:]+$/.test(key)) continue
    const subject = `account ${a.id}`
    findings.push(...apartAccountFindings(a, heldByAccount))
    if (num(a, 'pending') !== (pendingByAccount.get(a.id!) ?? 0))
      off(subject, `pending ${a.pending} != its payments pending ${pendingByAccount.get(a.id!) ?? 0}`)
    spent += num(a, 'spent')
  }
  if (spent !== earned + inTransit)
    off(
      'market',
      `buyer spend ${spent} != supplier earnings and fees less uncovered ${earned} + in transit ${inTransit}`,
    )
  findings.push(...(await auditSuppliersApart(store, prefix, offers)))
  return findings
}
