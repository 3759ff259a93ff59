// The live audit's consistent reads of a market held apart (cli/audit-live.ts), as audit-slots.ts's
// of one slot: what a finding names read again at one instant on its own slot. An offer, with its
// leased reservations (audit-offers-at.ts). Accounts, a MULTI per shard's slot, with their open
// attempts: found by the offers' leases, since reserve leases a reservation before hold admits its
// attempt and the lease goes only after the attempt ends; the leases are read again after the
// MULTI, and one of an account's it did not read (or fewer admitted attempts than it counts in
// flight) sends it again. A pair the whole audit named, by attempt id where it said it is: its
// reservation and lease, then its account's attempt; one charged and not yet posted is in transit
// while its lease runs.
import { attemptFields } from '../records/attempt-fields.ts'
import { accountShard, type Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { type AuditFinding, chargedByKey, type StreamAt } from './audit.ts'
import { type OfferAt, pendingOf, readOffersAt } from './audit-offers-at.ts'
import {
  accountFindings,
  apartAccountFindings,
  apartOfferFindings,
  keyFindings,
  offerFindings,
  tallyOpen,
} from './audit-owners.ts'
import { IN_TRANSIT, type PairAt, pairProblems } from './audit-pairs.ts'
import { type Suspects, streamAt } from './audit-slots.ts'
import { ownerKeyspaces } from './two-phase.ts'

/** Accounts read in one pass (a MULTI per shard among them). */
const BATCH = 100
/** Passes of one batch before its findings stand as read. */
const TRIES = 10

/** Each suspect's checks, over what one MULTI per slot read. */
export async function readOwnersAgainApart(
  store: Store,
  keys: Keyspace,
  suspects: Suspects,
): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = [...(await pairFindings(store, keys, suspects.pairs))]
  if (suspects.offers.size === 0 && suspects.accounts.size === 0) return findings
  const offerIds = await store.smembers(keys.offers)
  let offers = await readOffersAt(store, keys, offerIds)
  for (const at of offers) {
    if (!suspects.offers.has(at.offerId) || !at.row.id) continue
    findings.push(...offerFindings(at.row, tallyOpen([]), true), ...apartOfferFindings(at.row, pendingOf(at)))
  }
  const accounts = [...suspects.accounts]
  for (let i = 0; i < accounts.length; i += BATCH) {
    const batch = new Set(accounts.slice(i, i + BATCH))
    for (let tries = 0; ; tries++) {
      const leased = leasedOf(offers, batch)
      const read = await readAccountsAt(store, keys, batch, leased)
      offers = await readOffersAt(store, keys, offerIds)
      const missed = [...leasedOf(offers, batch).keys()].some((id) => !leased.has(id))
      if ((!missed && !read.short) || tries === TRIES) {
        findings.push(...(await accountsFindings(store, keys, read)))
        break
      }
    }
  }
  return findings
}

/** The leased reservations of these accounts: attempt id -> account id. */
function leasedOf(offers: OfferAt[], accounts: Set<string>): Map<string, string> {
  const leased = new Map<string, string>()
  for (const at of offers)
    for (const [id, r] of at.reservations) if (accounts.has(r.accountId!)) leased.set(id, r.accountId!)
  return leased
}

interface AccountsAt {
  rows: Map<string, Record<string, string>>
  streams: Map<string, StreamAt>
  admitted: Record<string, string>[]
  /** Some account counts more attempts in flight than were read admitted: one was missed. */
  short: boolean
}

/** The accounts, their Streams' ends and these attempts of theirs: one MULTI per shard's slot. */
async function readAccountsAt(
  store: Store,
  keys: Keyspace,
  accounts: Set<string>,
  leased: Map<string, string>,
): Promise<AccountsAt> {
  const byShard = new Map<string, string[]>()
  for (const id of accounts) byShard.set(accountShard(id), [...(byShard.get(accountShard(id)) ?? []), id])
  const read: AccountsAt = { rows: new Map(), streams: new Map(), admitted: [], short: false }
  await Promise.all(
    [...byShard.values()].map(async (ids) => {
      const attempts = [...leased].filter(([, accountId]) => ids.includes(accountId))
      const multi = store.multi()
      for (const id of ids) multi.hgetall(keys.account(id)).xinfo('STREAM', keys.accountActivity(id))
      for (const [id, accountId] of attempts) multi.hgetall(keys.accountAttempt(accountId, id))
      const replies = ((await multi.exec()) ?? []).map(([error, value]) => (error ? undefined : value))
      ids.forEach((id, i) => {
        read.rows.set(id, (replies[2 * i] as Record<string, string> | undefined) ?? {})
        read.streams.set(id, streamAt(replies[2 * i + 1] as unknown[] | undefined))
      })
      attempts.forEach((_, i) => {
        const row = replies[2 * ids.length + i] as Record<string, string> | undefined
        const a = row && Object.keys(row).length > 0 ? attemptFields(row) : undefined
        if (a?.state === 'admitted') read.admitted.push(a)
      })
    }),
  )
  for (const [id, row] of read.rows) {
    const admitted = read.admitted.filter((a) => a.accountId === id).length
    if (Number(row.inflight ?? 0) > admitted) read.short = true
  }
  return read
}

async function accountsFindings(store: Store, keys: Keyspace, read: AccountsAt): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  const tallies = tallyOpen(read.admitted)
  for (const [id, row] of read.rows) {
    if (!row.id) continue
    findings.push(...accountFindings(row, tallies, true), ...apartAccountFindings(row, tallies.heldByAccount))
    const { charged, complete } = await chargedByKey(store, keys.accountActivity(id), read.streams.get(id))
    findings.push(...keyFindings(id, row, tallies.heldByKey, charged, complete))
  }
  return findings
}

/**
 * The pairs named, each read again: its reservation with its lease on its offer's slot, then its
 * account's attempt.
 */
async function pairFindings(
  store: Store,
  keys: Keyspace,
  pairs: Map<string, PairAt>,
): Promise<AuditFinding[]> {
  const owners = ownerKeyspaces(keys.prefix)
  const found = await Promise.all(
    [...pairs].map(async ([id, at]) => {
      const offer = owners.offer(at.offerId)
      const replies =
        (await store.multi().hgetall(offer.reservation(id)).zscore(offer.leases, id).time().exec()) ?? []
      const [r, lease, time] = replies.map(([error, value]) => (error ? undefined : value)) as [
        Record<string, string> | undefined,
        string | null | undefined,
        [string, string] | undefined,
      ]
      const row = await store.hgetall(keys.accountAttempt(at.accountId, id))
      const held = Object.keys(row).length > 0 ? attemptFields(row) : undefined
      const reservation = r && Object.keys(r).length > 0 ? r : undefined
      const now = time ? Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000) : 0
      // Charged and not yet posted, while its lease runs: the post comes, or the reaper makes it.
      const live = lease != null && Number(lease) > now
      return pairProblems(reservation, held?.offerId === at.offerId ? held : undefined)
        .filter((problem) => !(problem === IN_TRANSIT && live))
        .map((problem) => ({ subject: `attempt ${id}`, problem }))
    }),
  )
  return found.flat()
}
