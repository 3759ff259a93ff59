// The market's half of `svc-gateway audit` (cli/audit.ts composes it with the suppliers' and the
// payouts'): checks DESIGN.md's invariants over the whole keyspace and names what is off.
// Held apart, what is checked here is each account's own (its money, its in-flight counts, its
// keys), each offer's capacity and the write-offs; the pairs across slots, the holds and the
// market's spend are audit-apart.ts's.
// It reads without a snapshot: exact at rest; `svc-gateway audit` reads each finding again before it
// names it (cli/audit-live.ts).
import { fieldsOf } from '../records/activity.ts'
import { attemptFields } from '../records/attempt-fields.ts'
import { accountShardKeyspaces, type Keyspace, ownerPrefix } from '../redis/keys.ts'
import { forEachKeyBatch } from '../redis/scan.ts'
import type { Store } from '../redis/store.ts'
import { forEachEntry, holdsEveryEntry } from '../redis/streams.ts'
import { ladderFindings } from './audit-ladder.ts'
import { accountFindings, keyFindings, offerFindings, tallyOpen } from './audit-owners.ts'

export interface AuditFinding {
  subject: string
  problem: string
}

/** A write-off: what a late clear could not charge, with its attempt and why. */
export interface WriteOff {
  attemptId: string
  /** micro-USDC */
  amount: number
  accountId: string | null
  offerId: string | null
  reason: string
}

export async function scanHashes(store: Store, pattern: string): Promise<Record<string, string>[]>
export async function scanHashes(
  store: Store,
  pattern: string,
  withKeys: true,
): Promise<{ key: string; row: Record<string, string> }[]>
export async function scanHashes(store: Store, pattern: string, withKeys = false) {
  const rows: { key: string; row: Record<string, string> }[] = []
  await forEachKeyBatch(store, pattern, async (keys, node) => {
    // Read where SCAN found them: the Cluster client's slot map may not know yet of a slot moved.
    const pipeline = node.pipeline()
    for (const key of keys) pipeline.hgetall(key)
    const replies = (await pipeline.exec()) ?? []
    for (const [i, [, row]] of replies.entries())
      rows.push({ key: keys[i]!, row: row as Record<string, string> })
  })
  return withKeys ? rows : rows.map(({ row }) => row)
}

/** Hashes in one pipeline where they share a slot; held apart (`apart`), each read on its own. */
async function hashesOf(store: Store, keys: string[], apart = false): Promise<Record<string, string>[]> {
  if (apart) return Promise.all(keys.map((key) => store.hgetall(key)))
  if (keys.length === 0) return []
  const pipeline = store.pipeline()
  for (const key of keys) pipeline.hgetall(key)
  return ((await pipeline.exec()) ?? []).map(([, row]) => row as Record<string, string>)
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]{}\\]/g, (c) => `\\${c}`)
}

/** A glob for keys on the prefix's own slot. */
export const marketGlob = (prefix: string, suffix: string) => `${escapeGlob(prefix)}:${suffix}`

/** The keys of every owner of a kind under `prefix` (ownerPrefix's tags), matched by a glob. */
export const ownerGlob = (prefix: string, owner: 'a' | 'o', suffix: string) =>
  `${ownerPrefix(prefix, `${owner}.*`).replace(/[?[\]\\]/g, (c) => `\\${c}`)}:${suffix}`

/**
 * The write-off lists and where each one's attempts are: the market's, and held apart each account
 * shard's too (a clear writes off on its account's slot).
 */
function writeOffLists(keys: Keyspace): Keyspace[] {
  return keys.layout === 'apart' ? [keys, ...accountShardKeyspaces(keys.prefix)] : [keys]
}

/** What every write-off list sums to, each read on its own slot. */
export async function writeOffsListed(store: Store, keys: Keyspace): Promise<number> {
  const lists = await Promise.all(writeOffLists(keys).map((list) => store.hvals(list.writeoffs)))
  return lists.flat().reduce((sum, amount) => sum + Number(amount), 0)
}

export async function auditMarket(store: Store, keys: Keyspace): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  const off = (subject: string, problem: string) => findings.push({ subject, problem })
  const num = (row: Record<string, string>, field: string) => Number(row[field] ?? 0)

  const apart = keys.layout === 'apart'
  // What in-flight attempts hold, by account, offer, key.
  const attempts = (
    await scanHashes(
      store,
      apart ? ownerGlob(keys.prefix, 'a', 'attempt:*') : marketGlob(keys.prefix, 'attempt:*'),
    )
  ).map((row) => attemptFields(row))
  const open = attempts.filter((a) => a.state === 'admitted')
  const tallies = tallyOpen(open)
  // Cleared attempts: billed within the hold (a late clear within the balance), the rest disputed.
  for (const a of attempts) {
    if (a.state !== 'cleared') continue
    const subject = `attempt ${a.id}`
    if (num(a, 'burn') > num(a, 'holdDiem'))
      off(subject, `billed burn ${a.burn} exceeds its hold ${a.holdDiem}`)
    if (!a.lateClear && num(a, 'costUsdc') > num(a, 'holdUsdc'))
      off(subject, `charged ${a.costUsdc} exceeds its hold ${a.holdUsdc}`)
    if (num(a, 'writtenOff') > 0 && !a.lateClear)
      off(subject, `written off ${a.writtenOff} without a late clear (a reaped lease or a lost admission)`)
  }
  // Held apart, an attempt's lease is its reservation's, on its offer's slot (audit-apart.ts).
  const leased = new Set(
    apart
      ? []
      : [...(await store.zrange(keys.leases, 0, -1)), ...(await store.zrange(keys.earlierLeases, 0, -1))],
  )
  for (const a of open) if (!apart && !leased.has(a.id!)) off(`attempt ${a.id}`, 'admitted but has no lease')
  const openIds = new Set(open.map((a) => a.id))
  for (const id of leased) if (!openIds.has(id)) off(`lease ${id}`, 'lease without an admitted attempt')

  // Accounts: funded = confirmed + pending + held + spent, nothing below zero.
  let spent = 0
  let accountWrittenOff = 0
  const accountIds = await store.smembers(keys.accounts)
  const accounts = await hashesOf(
    store,
    accountIds.map((id) => keys.account(id)),
    apart,
  )
  accounts.forEach((row, i) => {
    if (!row.id) {
      off(`account ${accountIds[i]}`, 'listed but its hash is missing')
      return
    }
    findings.push(...accountFindings(row, tallies, apart))
    spent += num(row, 'spent')
    accountWrittenOff += num(row, 'writtenOff')
  })
  for (const [i, row] of accounts.entries()) {
    if (row.id) {
      const id = accountIds[i]!
      const { charged, complete } = await chargedByKey(store, keys.accountActivity(id))
      findings.push(...keyFindings(id, row, tallies.heldByKey, charged, complete))
    }
  }

  // Offers: burned never above posted; holds and slots match the open attempts.
  let earned = 0
  let fees = 0
  const offerIds = await store.smembers(keys.offers)
  const offers = await hashesOf(
    store,
    offerIds.map((id) => keys.offer(id)),
    apart,
  )
  offers.forEach((row, i) => {
    if (!row.id) {
      off(`offer ${offerIds[i]}`, 'listed but its hash is missing')
      return
    }
    findings.push(...offerFindings(row, tallies, apart))
    earned += num(row, 'earned')
    fees += num(row, 'fees')
  })

  findings.push(...(await ladderFindings(store, keys, offers)))

  // Market: what buyers paid is what suppliers earned plus fees, summed over every account and every
  // offer (deleted offers included): each clear adds what it charged to both sides, so a clear half
  // applied, applied twice on one side, or paying a supplier what no buyer paid, shows here. Held
  // apart, what is in transit between the two counts too (audit-apart.ts).
  if (!apart && spent !== earned + fees)
    off('market', `buyer spend ${spent} != supplier earnings ${earned} + fees ${fees}`)
  // Every write-off is listed, once, by the clear that made it.
  const listed = await writeOffsListed(store, keys)
  if (listed !== accountWrittenOff)
    off('market', `accounts' written off ${accountWrittenOff} != the write-off list's ${listed}`)
  return findings
}

/** An account's Stream as a consistent read saw it (audit-slots.ts): its last id, its first, and whether it held every entry then. */
export interface StreamAt {
  last: string
  first: string | undefined
  complete: boolean
}

/**
 * What each key was charged over an account's Stream, and whether it holds every entry added. With
 * `at`, the entries up to that read only; one trimmed since makes the sum a part of it.
 */
export async function chargedByKey(store: Store, stream: string, at?: StreamAt) {
  const charged = new Map<string, number>()
  let first: string | undefined
  await forEachEntry(
    store,
    stream,
    (flat, id) => {
      first ??= id
      const f = fieldsOf(flat)
      const key = f.key ?? ''
      charged.set(key, (charged.get(key) ?? 0) + Number(f.costUsdc ?? 0))
    },
    at?.last ?? '+',
  )
  if (at) return { charged, complete: at.complete && first === at.first }
  return { charged, complete: await holdsEveryEntry(store, stream) }
}

/** Every write-off with its attempt and why (its attempt's record, while retained, says whose). */
export async function listWriteOffs(store: Store, keys: Keyspace): Promise<WriteOff[]> {
  const lists = await Promise.all(
    writeOffLists(keys).map(async (list) => {
      const entries = Object.entries(await store.hgetall(list.writeoffs))
      // The attempts beside the list they were written off in (a pipeline reaches one slot).
      const records = (
        await hashesOf(
          store,
          entries.map(([attemptId]) => list.attempt(attemptId)),
        )
      ).map((row) => attemptFields(row))
      return entries.map(([attemptId, amount], i) => ({ attemptId, amount, record: records[i] }))
    }),
  )
  return lists.flat().map(({ attemptId, amount, record }) => ({
    attemptId,
    amount: Number(amount),
    accountId: record?.accountId ?? null,
    offerId: record?.offerId ?? null,
    reason: 'a result came after its lease was reaped, for more than the balance then held',
  }))
}
