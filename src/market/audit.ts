// `svc-gateway audit`: checks DESIGN.md's invariants over the whole keyspace and names what is off.
// It reads without a snapshot, so run it when traffic is quiet (after a test, a drain, a restart).
import type Redis from 'ioredis'
import { masters } from '../redis/connection.ts'
import type { Keyspace } from '../redis/keys.ts'

export interface AuditFinding {
  subject: string
  problem: string
}

const MONEY_FIELDS = ['confirmed', 'pending', 'held', 'spent', 'funded', 'writtenOff'] as const

async function scanHashes(redis: Redis, pattern: string): Promise<Record<string, string>[]> {
  const rows: Record<string, string>[] = []
  // SCAN walks one server; on a Cluster every master is walked (the hash tag puts ours on one).
  for (const node of await masters(redis)) {
    let cursor = '0'
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
      cursor = next
      if (keys.length === 0) continue
      const pipeline = redis.pipeline()
      for (const key of keys) pipeline.hgetall(key)
      for (const [, row] of (await pipeline.exec()) ?? []) rows.push(row as Record<string, string>)
    } while (cursor !== '0')
  }
  return rows
}

async function hashesOf(redis: Redis, keys: string[]): Promise<Record<string, string>[]> {
  if (keys.length === 0) return []
  const pipeline = redis.pipeline()
  for (const key of keys) pipeline.hgetall(key)
  return ((await pipeline.exec()) ?? []).map(([, row]) => row as Record<string, string>)
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]{}\\]/g, (c) => `\\${c}`)
}

export async function auditMarket(redis: Redis, keys: Keyspace): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  const off = (subject: string, problem: string) => findings.push({ subject, problem })
  const num = (row: Record<string, string>, field: string) => Number(row[field] ?? 0)

  // What in-flight attempts hold, by account, offer, key.
  const attempts = await scanHashes(redis, `${escapeGlob(keys.base)}attempt:*`)
  const open = attempts.filter((a) => a.state === 'admitted')
  const heldByAccount = new Map<string, number>()
  const heldByOffer = new Map<string, number>()
  const slotsByOffer = new Map<string, number>()
  const inflight = new Map<string, number>()
  const add = (map: Map<string, number>, key: string, amount: number) =>
    map.set(key, (map.get(key) ?? 0) + amount)
  for (const a of open) {
    add(heldByAccount, a.accountId!, num(a, 'holdUsdc'))
    add(heldByOffer, a.offerId!, num(a, 'holdDiem'))
    add(slotsByOffer, a.offerId!, 1)
    add(inflight, `k:${a.keyId}`, 1)
    add(inflight, `a:${a.accountId}`, 1)
    if (a.lane) add(inflight, `${a.lane}:${a.accountId}`, 1)
  }
  const leased = new Set(await redis.zrange(keys.leases, 0, -1))
  for (const a of open) if (!leased.has(a.id!)) off(`attempt ${a.id}`, 'admitted but has no lease')
  const openIds = new Set(open.map((a) => a.id))
  for (const id of leased) if (!openIds.has(id)) off(`lease ${id}`, 'lease without an admitted attempt')

  // Accounts: funded = confirmed + pending + held + spent, nothing below zero.
  let spent = 0
  let accountWrittenOff = 0
  const accountIds = await redis.smembers(keys.accounts)
  const accounts = await hashesOf(
    redis,
    accountIds.map((id) => keys.account(id)),
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
    if (sum !== num(row, 'funded'))
      off(subject, `funded ${num(row, 'funded')} != confirmed + pending + held + spent ${sum}`)
    const held = heldByAccount.get(row.id) ?? 0
    if (num(row, 'held') !== held)
      off(subject, `held ${num(row, 'held')} != holds of its open attempts ${held}`)
    spent += num(row, 'spent')
    accountWrittenOff += num(row, 'writtenOff')
  })

  // Offers: burned never above posted; holds and slots match the open attempts.
  let earned = 0
  let fees = 0
  const offerIds = await redis.smembers(keys.offers)
  const offers = await hashesOf(
    redis,
    offerIds.map((id) => keys.offer(id)),
  )
  offers.forEach((row, i) => {
    const subject = `offer ${offerIds[i]}`
    if (!row.id) {
      off(subject, 'listed but its hash is missing')
      return
    }
    if (num(row, 'burned') > num(row, 'capacity'))
      off(subject, `burned ${row.burned} exceeds capacity ${row.capacity}`)
    for (const field of ['burned', 'held', 'inflight', 'earned', 'fees']) {
      if (num(row, field) < 0) off(subject, `${field} is below zero: ${row[field]}`)
    }
    const held = heldByOffer.get(row.id) ?? 0
    if (num(row, 'held') !== held)
      off(subject, `held ${num(row, 'held')} != holds of its open attempts ${held}`)
    const slots = slotsByOffer.get(row.id) ?? 0
    if (num(row, 'inflight') !== slots)
      off(subject, `inflight ${num(row, 'inflight')} != its open attempts ${slots}`)
    earned += num(row, 'earned')
    fees += num(row, 'fees')
  })

  const counters = await redis.hgetall(keys.inflight)
  for (const [field, value] of Object.entries(counters)) {
    if (Number(value) !== (inflight.get(field) ?? 0)) {
      off(`in-flight ${field}`, `count ${value} != open attempts ${inflight.get(field) ?? 0}`)
    }
  }
  for (const [field, count] of inflight) {
    if (counters[field] === undefined) off(`in-flight ${field}`, `missing; ${count} open attempts`)
  }

  // Market: what buyers paid plus what was written off is what suppliers earned plus fees, summed
  // over every account and every offer (deleted offers included): each clear adds the same cost to
  // both sides, so a clear half applied, or applied twice on one side, shows here.
  if (spent + accountWrittenOff !== earned + fees)
    off(
      'market',
      `buyer spend ${spent} + written off ${accountWrittenOff} != supplier earnings ${earned} + fees ${fees}`,
    )
  return findings
}
