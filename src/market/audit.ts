// The market's half of `svc-gateway audit` (cli/audit.ts composes it with the suppliers' and the
// payouts'): checks DESIGN.md's invariants over the whole keyspace and names what is off.
// Held apart, what is checked here is each account's own (its money, its in-flight counts, its
// keys), each offer's capacity and the write-offs; the pairs across slots, the holds and the
// market's spend are audit-apart.ts's.
// It reads without a snapshot, so run it when traffic is quiet (after a test, a drain, a restart).
import { fieldsOf } from '../records/activity.ts'
import { attemptFields } from '../records/attempt-fields.ts'
import { accountShardKeyspaces, type Keyspace, ownerPrefix } from '../redis/keys.ts'
import { forEachKeyBatch } from '../redis/scan.ts'
import type { Store } from '../redis/store.ts'
import { forEachEntry, holdsEveryEntry } from '../redis/streams.ts'

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

const MONEY_FIELDS = ['confirmed', 'pending', 'held', 'spent', 'funded', 'writtenOff'] as const

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
  const heldByAccount = new Map<string, number>()
  const heldByKey = new Map<string, number>()
  const heldByOffer = new Map<string, number>()
  const slotsByOffer = new Map<string, number>()
  const inflight = new Map<string, number>()
  const add = (map: Map<string, number>, key: string, amount: number) =>
    map.set(key, (map.get(key) ?? 0) + amount)
  for (const a of open) {
    add(heldByAccount, a.accountId!, num(a, 'holdUsdc'))
    add(heldByKey, `${a.accountId}|${a.keyId}`, num(a, 'holdUsdc'))
    add(heldByOffer, a.offerId!, num(a, 'holdDiem'))
    add(slotsByOffer, a.offerId!, 1)
    add(inflight, `${a.accountId}|inflight`, 1)
    add(inflight, `${a.accountId}|inflight:${a.keyId}`, 1)
    if (a.capGroup) add(inflight, `${a.accountId}|group:${a.capGroup}`, 1)
  }
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
    const subject = `account ${accountIds[i]}`
    if (!row.id) {
      off(subject, 'listed but its hash is missing')
      return
    }
    for (const field of MONEY_FIELDS) {
      const value = num(row, field)
      if (!Number.isSafeInteger(value)) off(subject, `${field} is not an integer: ${row[field]}`)
      else if (value < 0) off(subject, `${field} is below zero: ${value}`)
    }
    const sum = num(row, 'confirmed') + num(row, 'pending') + num(row, 'held') + num(row, 'spent')
    // Held apart, audit-apart.ts checks the sum and the holds.
    if (!apart && sum !== num(row, 'funded'))
      off(subject, `funded ${num(row, 'funded')} != confirmed + pending + held + spent ${sum}`)
    const held = heldByAccount.get(row.id) ?? 0
    if (!apart && num(row, 'held') !== held)
      off(subject, `held ${num(row, 'held')} != holds of its open attempts ${held}`)
    spent += num(row, 'spent')
    accountWrittenOff += num(row, 'writtenOff')
    // Its in-flight counts (inflight, inflight:<keyId>, group:<name>) are its open attempts.
    for (const [field, value] of Object.entries(row)) {
      if (!IN_FLIGHT_FIELD.test(field)) continue
      const open = inflight.get(`${row.id}|${field}`) ?? 0
      if (Number(value) !== open) off(subject, `${field} ${value} != its open attempts ${open}`)
    }
    for (const [counted, open] of inflight) {
      const [accountId, field] = counted.split('|') as [string, string]
      if (accountId === row.id && row[field] === undefined)
        off(subject, `${field} missing; ${open} open attempts`)
    }
  })
  for (const [i, row] of accounts.entries()) {
    if (row.id)
      for (const finding of await auditKeys(store, keys, accountIds[i]!, row, heldByKey))
        findings.push(finding)
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
    const subject = `offer ${offerIds[i]}`
    if (!row.id) {
      off(subject, 'listed but its hash is missing')
      return
    }
    // Held apart, a late clear's burn (its capacity went back before it came) may pass capacity; it
    // is recorded as such (lib/posts.lua lateBurned).
    if (num(row, 'burned') > num(row, 'capacity') + num(row, 'lateBurned'))
      off(subject, `burned ${row.burned} exceeds capacity ${row.capacity} (late ${row.lateBurned ?? 0})`)
    for (const field of ['burned', 'held', 'inflight', 'earned', 'fees']) {
      if (num(row, field) < 0) off(subject, `${field} is below zero: ${row[field]}`)
    }
    earned += num(row, 'earned')
    fees += num(row, 'fees')
    // Held apart, an offer holds its reservations, not attempts (audit-apart.ts).
    if (apart) return
    const held = heldByOffer.get(row.id) ?? 0
    if (num(row, 'held') !== held)
      off(subject, `held ${num(row, 'held')} != holds of its open attempts ${held}`)
    const slots = slotsByOffer.get(row.id) ?? 0
    if (num(row, 'inflight') !== slots)
      off(subject, `inflight ${num(row, 'inflight')} != its open attempts ${slots}`)
  })

  // Market: what buyers paid is what suppliers earned plus fees, summed over every account and every
  // offer (deleted offers included): each clear adds what it charged to both sides, so a clear half
  // applied, applied twice on one side, or paying a supplier what no buyer paid, shows here. Held
  // apart, what is in transit between the two counts too (audit-apart.ts).
  if (!apart && spent !== earned + fees)
    off('market', `buyer spend ${spent} != supplier earnings ${earned} + fees ${fees}`)
  // Every write-off is listed, once, by the clear that made it.
  const lists = await Promise.all(writeOffLists(keys).map((list) => store.hvals(list.writeoffs)))
  const listed = lists.flat().reduce((sum, amount) => sum + Number(amount), 0)
  if (listed !== accountWrittenOff)
    off('market', `accounts' written off ${accountWrittenOff} != the write-off list's ${listed}`)
  return findings
}

const IN_FLIGHT_FIELD = /^(inflight(:.+)?|group:.+)$/

const KEY_FIELD = /^(limit|spent|held|reset|pspent):(.+)$/

/**
 * Per API key of an account (the account hash's limit:/spent:/held:<keyId> fields): what it holds
 * is what its open attempts hold; what it spent never passes its limit (a periodic limit's: what
 * it spent in the period it last counted, reset:/pspent:<keyId>); and what it spent is what
 * its ended attempts were charged, summed over the account's ended-attempt Stream. Attempt
 * hashes and Stream entries both expire with the record retention, so the sum is checked as equal
 * while the Stream still holds every entry it was given (XINFO's entries-added = length), and
 * as at most the key's spent once older entries were trimmed.
 */
async function auditKeys(
  store: Store,
  keys: Keyspace,
  accountId: string,
  row: Record<string, string>,
  heldByKey: Map<string, number>,
): Promise<AuditFinding[]> {
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
  const { charged, complete } = await chargedByKey(store, keys.accountActivity(accountId))
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

/** What each key was charged over an account's Stream, and whether it holds every entry added. */
async function chargedByKey(store: Store, stream: string) {
  const charged = new Map<string, number>()
  await forEachEntry(store, stream, (flat) => {
    const f = fieldsOf(flat)
    const key = f.key ?? ''
    charged.set(key, (charged.get(key) ?? 0) + Number(f.costUsdc ?? 0))
  })
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
