// A one-slot market moved to the layout held apart (`svc-gateway layout migrate apart`), with every
// gateway stopped. Refused while a replica was seen lately or anything is open (migrate-checks.ts).
// Then the record says a migration is under way (no gateway or command opens the market until it
// is done), and step by step: the offers in the full set (at their in-flight cap) and the dry
// set rejoin the ladder; each offer's hash goes to its own tag, with what the market's slot keeps of it held
// apart (its supplier's copy of its state, a suspension copied onto it); each
// supplier's fills Stream is split into one per offer; each attempt goes to its account's shard,
// a cleared one with the posted reservation its offer keeps held apart; each account's payments
// are listed on its shard, and every key of the account moves there (its hash made a hash table
// first, as a new account's is); webhook owners are flagged
// where the consumers look. 'apart' is recorded last. The clear's totals, the usage stats, the
// write-offs and the ended-attempt Stream stay on the market's slot, where the held-apart readers
// look as well as on the shards.
//
// Every step can be run again: a key is moved with DUMP and RESTORE then DEL (move-key.ts: a copy
// on both sides is whole, and kept), an entry is copied once (by its id), a derived field is
// written with the value it had. A migration killed anywhere finishes when run again.
import { marketGlob, scanHashes } from '../market/audit.ts'
import { ladderMoved, ladderScore } from '../market/offer-index.ts'
import { MIGRATED_FIELDS } from '../market/totals.ts'
import { ownerKeyspaces } from '../market/two-phase.ts'
import { fieldsOf } from '../records/activity.ts'
import { attemptFields } from '../records/attempt-fields.ts'
import { ACCOUNT_TABLE, keyspace } from '../redis/keys.ts'
import { migratingTo } from '../redis/layout.ts'
import { moveKey } from '../redis/move-key.ts'
import { forEachKeyBatch } from '../redis/scan.ts'
import type { Store } from '../redis/store.ts'
import { forEachEntry, holdsEveryEntry } from '../redis/streams.ts'
import { openWork, seenReplicas } from './migrate-checks.ts'

/** Every max price a capacity snapshot is cached for. */
const CAPACITY_SNAPSHOTS: (number | 'all')[] = ['all', ...Array.from({ length: 51 }, (_, i) => 30 + i)]

export interface MigrateOptions {
  /** How long a replica stays seen after its last reaper pass. */
  seenWithinMs: number
  /** Progress, a line at a time. */
  say: (line: string) => void
  /** For a test of resuming: the writes allowed before the migration stops, as a kill would. */
  writes?: number
}

/** The migration may not start: why, one line each. Nothing was changed. */
export class MigrationRefused extends Error {
  constructor(readonly reasons: string[]) {
    super(`the market cannot be migrated now:\n  ${reasons.join('\n  ')}`)
  }
}

/** Stopped part-way by MigrateOptions.writes. */
export class MigrationStopped extends Error {}

/** Moves the market on `prefix` to apart; false when it already was. */
export async function migrateApart(store: Store, prefix: string, options: MigrateOptions): Promise<boolean> {
  const one = keyspace(prefix)
  const recorded = await store.get(one.layoutRecord)
  if (recorded === 'apart') return false
  const seen = await seenReplicas(store, one, options.seenWithinMs)
  if (seen.length > 0) throw new MigrationRefused(seen)
  if (recorded !== migratingTo('apart')) {
    const open = await openWork(store, one)
    if (open.length > 0) throw new MigrationRefused(open)
    await store.set(one.layoutRecord, migratingTo('apart'))
    // A gateway that started as the check ran is seen now: the record is put back, nothing moved.
    const late = await seenReplicas(store, one, options.seenWithinMs)
    if (late.length > 0) {
      await (recorded === null ? store.del(one.layoutRecord) : store.set(one.layoutRecord, recorded))
      throw new MigrationRefused(late)
    }
  }
  let left = options.writes ?? Number.POSITIVE_INFINITY
  const write = () => {
    if (left-- <= 0) throw new MigrationStopped('stopped part-way (a test of resuming)')
  }
  const steps = new Steps(store, prefix, write)
  await steps.totals()
  await steps.ladder()
  options.say(`offers: ${await steps.offers()} moved to their own slots`)
  // The ladder and the offers' standing were written: the ladder's version moves, as every change
  // of them moves it (a view reads them again only then).
  write()
  await ladderMoved(store, one)
  options.say(`fills: ${await steps.fills()} entries copied onto their offers' slots`)
  options.say(`attempts: ${await steps.attempts()} moved to their accounts' shards`)
  options.say(`payments: ${await steps.payments()} listed on their accounts' shards`)
  options.say(`accounts: ${await steps.accounts()} keys moved to their shards`)
  await steps.webhooks()
  // The capacity snapshots cached for every replica are computed again by the first that asks.
  write()
  await store.del(...CAPACITY_SNAPSHOTS.map((max) => one.capacitySnapshot(max)))
  write()
  await store.set(one.layoutRecord, 'apart')
  return true
}

class Steps {
  private readonly one
  private readonly apart
  private readonly owners

  constructor(
    private readonly store: Store,
    private readonly prefix: string,
    private readonly write: () => void,
  ) {
    this.one = keyspace(prefix)
    this.apart = keyspace(prefix, 'apart')
    this.owners = ownerKeyspaces(prefix)
  }

  /**
   * What the market's clears charged so far (on one slot, the sums of its offers' earnings and fees)
   * kept on the market's hash, where the totals held apart read it beside the shards' (totals.ts).
   * The offers' sums do not move while the gateways are stopped: read where each offer is now.
   */
  async totals(): Promise<void> {
    const { store, one, apart } = this
    let [spent, fees] = [0, 0]
    for (const id of await store.smembers(one.offers)) {
      let [earned, fee] = await store.hmget(one.offer(id), 'earned', 'fees')
      if (earned === null) [earned, fee] = await store.hmget(apart.offer(id), 'earned', 'fees')
      spent += Number(earned ?? 0) + Number(fee ?? 0)
      fees += Number(fee ?? 0)
    }
    this.write()
    await store.hset(one.market, MIGRATED_FIELDS[0], spent, MIGRATED_FIELDS[1], fees)
  }

  /**
   * The offers at their in-flight cap or dry back onto the ladder: held apart, the ladder alone
   * lists the active offers (a reservation refuses one at its cap or without room on its own slot).
   */
  async ladder(): Promise<void> {
    const { store, one } = this
    for (const set of [one.full, one.dry]) {
      const off = await store.zrange(set, 0, -1, 'WITHSCORES')
      if (off.length === 0) continue
      this.write()
      await store.zadd(one.ladder, ...off.flatMap((_, i) => (i % 2 === 0 ? [off[i + 1]!, off[i]!] : [])))
      this.write()
      await store.del(set)
    }
  }

  /** `work` for each key on the market's slot matching `glob`, several at once. */
  private eachKey(glob: string, work: (key: string) => Promise<void>): Promise<void> {
    return forEachKeyBatch(this.store, marketGlob(this.prefix, glob), (batch) => eachAtOnce(batch, work))
  }

  /** Each offer to its own tag; its supplier's copy of its state, and its supplier's suspension. */
  async offers(): Promise<number> {
    const { store, one, apart } = this
    let moved = 0
    await eachAtOnce(await store.smembers(one.offers), async (id) => {
      this.write()
      if (await moveKey(store, one.offer(id), apart.offer(id))) moved++
      const o = await store.hgetall(apart.offer(id))
      if (!o.id || !o.supplierId) return
      const digest = o.upstreamKeyDigest ? [`digest:${id}`, o.upstreamKeyDigest] : []
      this.write()
      await store.hset(
        apart.supplierOfferStates(o.supplierId),
        id,
        o.status ?? 'paused',
        `score:${id}`,
        ladderScore(o.askCents, o.seq),
        ...digest,
      )
      if ((await store.hget(one.supplier(o.supplierId), 'status')) === 'suspended') {
        this.write()
        await store.hset(apart.offer(id), 'suspended', '1')
      }
    })
    return moved
  }

  /**
   * Each supplier's fills into one Stream per offer, with their ids. A Stream retention had trimmed
   * leaves its offers' marked so (markTrimmed), so that the audit reads their sums as a bound, as it
   * read the supplier's.
   */
  async fills(): Promise<number> {
    const { store, one, apart } = this
    let copied = 0
    for (const supplierId of await store.smembers(one.suppliers)) {
      const source = one.supplierFills(supplierId)
      if (!(await store.exists(source))) continue
      const tops = new Map<string, string>()
      await forEachEntry(store, source, async (flat, id) => {
        const target = apart.offerFills(fieldsOf(flat).offer ?? '', supplierId)
        const top = tops.get(target) ?? (await lastId(store, target))
        if (!isAfter(id, top)) return
        this.write()
        await store.xadd(target, id, ...flat)
        tops.set(target, id)
        copied++
      })
      if (!(await holdsEveryEntry(store, source))) {
        for (const offerId of await store.smembers(one.supplierOffers(supplierId))) {
          this.write()
          await markTrimmed(store, apart.offerFills(offerId, supplierId))
        }
      }
      this.write()
      // Its sums too: each offer's Stream is summed beside it from here on.
      await store.del(source, one.fillsSums(source))
    }
    return copied
  }

  /** Each attempt to its account's shard; a cleared one's posted reservation on its offer's slot. */
  async attempts(): Promise<number> {
    const { store, one, owners } = this
    let moved = 0
    await this.eachKey('attempt:*', async (key) => {
      const a = attemptFields(await store.hgetall(key))
      // No account named: nothing held apart would find it; left where it is.
      if (!a.accountId) return
      const id = key.slice(`${one.base}attempt:`.length)
      if (a.state === 'cleared' && a.offerId) {
        const reservation = owners.offer(a.offerId).reservation(id)
        const ttl = await store.pttl(key)
        this.write()
        await store.hset(reservation, {
          state: 'posted',
          offerId: a.offerId,
          accountId: a.accountId,
          holdDiem: a.holdDiem ?? '0',
          askCents: a.askCents ?? '0',
          burnDiem: a.burn ?? '0',
          earnedUsdc: String(Number(a.costUsdc ?? 0) - Number(a.fee ?? 0)),
          feeUsdc: a.fee ?? '0',
        })
        if (ttl > 0) await store.pexpire(reservation, ttl)
      }
      this.write()
      if (await moveKey(store, key, owners.account(a.accountId).attempt(id))) moved++
    })
    return moved
  }

  /** Each credited payment listed on its account's shard, in its state, as a credit held apart lists it. */
  async payments(): Promise<number> {
    const { store, apart } = this
    let listed = 0
    await eachAtOnce(await scanHashes(store, marketGlob(this.prefix, 'x402:payment:*')), async (p) => {
      if (!p.id || !p.accountId) return
      this.write()
      await store.hset(
        apart.accountPayments(p.accountId),
        p.id,
        p.state === 'confirmed' ? 'confirmed' : 'pending',
      )
      listed++
    })
    return listed
  }

  /** Every key named for an account (`acct:<id>` and `acct:<id>:...`) to its shard, the same name after the tag. */
  async accounts(): Promise<number> {
    const { store, one, apart } = this
    let moved = 0
    await this.eachKey('acct:*', async (key) => {
      const name = key.slice(one.base.length)
      const accountId = name.slice('acct:'.length).split(':')[0]!
      // An account made without its table field (lua/create-account.lua) moves as a hash table: a
      // moved key keeps its encoding.
      if (name === `acct:${accountId}` && (await store.exists(key))) {
        this.write()
        await store.hsetnx(key, 'table', ACCOUNT_TABLE)
      }
      this.write()
      if (await moveKey(store, key, `${apart.accountBase(accountId)}${name}`)) moved++
    })
    return moved
  }

  /** The delivery consumers held apart read the due sets listed: every account owner's shard's, and the market's. */
  async webhooks(): Promise<void> {
    const { store, apart } = this
    const owners = await store.smembers(apart.webhookOwners)
    if (owners.length === 0) return
    this.write()
    await store.sadd(apart.webhookDueSets, apart.webhookDueOfPrefix)
    for (const owner of owners) {
      if (!owner.startsWith('acct:')) continue
      this.write()
      await store.sadd(apart.webhookDueSets, apart.webhookDue(owner))
      // Looked at once by the consumers: an event written before the move is sent.
      await store.sadd(apart.webhookDue(owner), owner)
    }
  }
}

/** Keys moved at once: each move is a few round trips, and no two touch the same key. */
const AT_ONCE = 64

/**
 * `work` for every item, AT_ONCE at a time; each group ends whole (none left running) before the
 * first failure is thrown, so a migration stopped part-way has nothing still writing behind it.
 */
async function eachAtOnce<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += AT_ONCE) {
    const results = await Promise.allSettled(items.slice(i, i + AT_ONCE).map(work))
    const failed = results.find((r) => r.status === 'rejected')
    if (failed) throw failed.reason
  }
}

/** A Stream's last id, 0-0 when it does not exist. */
async function lastId(store: Store, stream: string): Promise<string> {
  if (!(await store.exists(stream))) return '0-0'
  const info = (await store.xinfo('STREAM', stream)) as unknown[]
  return String(info[info.indexOf('last-generated-id') + 1])
}

/**
 * A Stream marked as having lost entries (XINFO's entries-added above its length), as retention
 * leaves one: an entry added and deleted in one transaction, after every entry it holds.
 */
async function markTrimmed(store: Store, stream: string): Promise<void> {
  const [ms, seq] = (await lastId(store, stream)).split('-') as [string, string]
  const id = `${ms}-${BigInt(seq) + 1n}`
  await store.multi().xadd(stream, id, 'trimmed', '1').xdel(stream, id).exec()
}

/** Whether Stream id `a` comes after `b`. */
function isAfter(a: string, b: string): boolean {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint]
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint]
  return am > bm || (am === bm && as > bs)
}
