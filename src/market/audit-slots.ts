// The live audit's consistent reads of a market on one slot (cli/audit-live.ts): accounts, offers
// and attempts read at one instant, in one MULTI, so that a request admitted or cleared between two
// reads cannot make a finding. An account's or an offer's open attempts are found by their leases:
// admit leases each attempt it admits and every end drops its lease, in the same script. The MULTI
// reads the leases with the owners and the attempts of theirs it knows; a lease of an attempt it
// did not know yet sends it again, with that attempt, until it read every one it needs. It reads
// the open attempts' ids and a batch of owners, never the market whole.
import { attemptFields } from '../records/attempt-fields.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { type AuditFinding, chargedByKey, type StreamAt } from './audit.ts'
import { accountFindings, keyFindings, offerFindings, tallyOpen } from './audit-owners.ts'
import type { PairAt } from './audit-pairs.ts'

/**
 * The owners to read again: accounts (their keys with them), offers, attempts (with their leases);
 * held apart, pairs by attempt id (audit-slots-apart.ts).
 */
export interface Suspects {
  accounts: Set<string>
  offers: Set<string>
  attempts: Set<string>
  pairs: Map<string, PairAt>
}

/** Owners read in one MULTI. */
const BATCH = 100
/** Reads of one batch before its findings stand as read: each misses only attempts leased meanwhile. */
const TRIES = 50

type Owner = { accountId?: string; offerId?: string }

/** Each suspect's checks, over what one MULTI per batch read. */
export async function readOwnersAgain(
  store: Store,
  keys: Keyspace,
  suspects: Suspects,
): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  const known = new Map<string, Owner>()
  const owners = [
    ...[...suspects.accounts].map((id) => ({ account: id, offer: undefined })),
    ...[...suspects.offers].map((id) => ({ account: undefined, offer: id })),
  ]
  // The attempts named are read in every batch: an admitted one without a lease is still its
  // owners' (the whole audit's scan counts it too).
  const named = [...suspects.attempts]
  for (let i = 0; i === 0 || i < owners.length; i += BATCH) {
    const batch = owners.slice(i, i + BATCH)
    const accounts = batch.flatMap((s) => (s.account ? [s.account] : []))
    const offers = batch.flatMap((s) => (s.offer ? [s.offer] : []))
    const found = await readBatchAgain(store, keys, known, accounts, offers, named)
    findings.push(...found.filter((f) => i === 0 || !/^(attempt|lease) /.test(f.subject)))
  }
  return findings
}

async function readBatchAgain(
  store: Store,
  keys: Keyspace,
  known: Map<string, Owner>,
  accountIds: string[],
  offerIds: string[],
  named: string[],
): Promise<AuditFinding[]> {
  const accounts = new Set(accountIds)
  const offers = new Set(offerIds)
  const mine = (id: string) => {
    const o = known.get(id)
    return (
      !o ||
      (o.accountId !== undefined && accounts.has(o.accountId)) ||
      (o.offerId !== undefined && offers.has(o.offerId))
    )
  }
  // The first read learns the leases; each next one also reads the attempts of those it did not
  // know, until it read every attempt leased then that is a suspect's (an attempt's account and
  // offer never change).
  let unknown: string[] = []
  for (let tries = 0; ; tries++) {
    const wanted = [...new Set([...named, ...unknown, ...[...known.keys()].filter(mine)])]
    const read = await readAtOnce(store, keys, accountIds, offerIds, wanted)
    // An attempt read and not there (its lease is then the finding) is no one's.
    for (const id of wanted) {
      const a = read.attempts.get(id)
      known.set(id, { accountId: a?.accountId, offerId: a?.offerId })
    }
    const missed = read.leased.filter((id) => !read.attempts.has(id) && (!known.has(id) || mine(id)))
    if (missed.length === 0 || tries === TRIES) return findingsOf(store, keys, read, named)
    unknown = missed
  }
}

interface Read {
  leased: string[]
  attempts: Map<string, Record<string, string>>
  accounts: Map<string, Record<string, string>>
  streams: Map<string, StreamAt>
  offers: Map<string, Record<string, string>>
}

/** The leases, the attempts, the accounts with their Streams' ends, the offers: one MULTI. */
async function readAtOnce(
  store: Store,
  keys: Keyspace,
  accountIds: string[],
  offerIds: string[],
  attemptIds: string[],
): Promise<Read> {
  const multi = store.multi()
  multi.zrange(keys.leases, 0, -1).zrange(keys.earlierLeases, 0, -1)
  for (const id of attemptIds) multi.hgetall(keys.attempt(id))
  for (const id of accountIds) multi.hgetall(keys.account(id)).xinfo('STREAM', keys.accountActivity(id))
  for (const id of offerIds) multi.hgetall(keys.offer(id))
  const replies = ((await multi.exec()) ?? []).map(([error, value]) => (error ? undefined : value))
  let at = 0
  const next = () => replies[at++]
  const leased = [...(next() as string[]), ...(next() as string[])]
  const read: Read = {
    leased,
    attempts: new Map(),
    accounts: new Map(),
    streams: new Map(),
    offers: new Map(),
  }
  for (const id of attemptIds) {
    const row = next() as Record<string, string>
    if (row && Object.keys(row).length > 0) read.attempts.set(id, attemptFields(row))
  }
  for (const id of accountIds) {
    read.accounts.set(id, next() as Record<string, string>)
    read.streams.set(id, streamAt(next() as unknown[] | undefined))
  }
  for (const id of offerIds) read.offers.set(id, next() as Record<string, string>)
  return read
}

/** XINFO STREAM's answer as where the Stream stood; none (no Stream yet): nothing in it. */
export function streamAt(info: unknown[] | undefined): StreamAt {
  if (!info) return { last: '0-0', first: undefined, complete: true }
  const field = (name: string) => info[info.indexOf(name) + 1]
  const first = field('first-entry') as [string, unknown] | null
  return {
    last: String(field('last-generated-id')),
    first: first?.[0],
    complete: Number(field('entries-added')) === Number(field('length')),
  }
}

async function findingsOf(
  store: Store,
  keys: Keyspace,
  read: Read,
  named: string[],
): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  const leased = new Set(read.leased)
  const open = [...read.attempts.values()].filter((a) => a.state === 'admitted')
  const tallies = tallyOpen(open)
  for (const id of named) {
    const a = read.attempts.get(id)
    if (a?.state === 'admitted' && !leased.has(id))
      findings.push({ subject: `attempt ${id}`, problem: 'admitted but has no lease' })
    if (leased.has(id) && a?.state !== 'admitted')
      findings.push({ subject: `lease ${id}`, problem: 'lease without an admitted attempt' })
  }
  for (const [id, row] of read.accounts) {
    if (!row?.id) continue
    findings.push(...accountFindings(row, tallies, false))
    const { charged, complete } = await chargedByKey(store, keys.accountActivity(id), read.streams.get(id))
    findings.push(...keyFindings(id, row, tallies.heldByKey, charged, complete))
  }
  for (const row of read.offers.values()) if (row?.id) findings.push(...offerFindings(row, tallies, false))
  return findings
}
