// The clears this replica had acknowledged and Redis may not have kept yet, sent again when a
// connection to Redis closes. Redis acknowledges a write before its replicas have it (replication
// is asynchronous) and before its disk does (an AOF fsynced once a second): a master killed after a
// clear its replicas never got leaves a promoted replica, or a restarted server, without it, and the
// buyer told a cost it was never charged. A clear is kept for the window below and, on a master
// that has replicas, until they have it (src/redis/replication-watch.ts), however long their link
// lags. On a Cluster each clear is kept by the masters it wrote on (held apart, its account's and
// its offer's): one master's lagging replica keeps that master's clears alone, and a connection
// lost to one master sends again only what that master acknowledged, or holds now (a slot moved to
// it since, its keys with it). A clear is idempotent by attempt id, so sending it again is safe
// either way: one the store kept answers as a replay and changes nothing; one it lost is charged
// now (its attempt admitted, reaped by then, or lost with its admission: lua/clear.lua).
import type { Logger } from 'pino'
import { metrics } from '../metrics/gateway-metrics.ts'
import { mastersOf, type Store } from '../redis/store.ts'
import { waitsFor, whileStoreAway } from '../redis/store-retry.ts'
import type { Clearing } from './clearing.ts'
import type { AttemptRef, ClearArgs } from './steps.ts'

/**
 * How long a clear is kept in any case: a disk fsynced once a second, and a master without
 * replicas. Every replay costs Redis a clear's read: the window is kept short so that a reconnect
 * does not replay much.
 */
export const JOURNAL_MS = 2_000
/**
 * The longest a clear waits for its master's replicas: past it (a replica cut off that long, or
 * removed for good) it is forgotten unconfirmed and counted, so that memory stays bounded.
 */
export const KEEP_UNREPLICATED_MS = 30_000
/** The most clears kept at once, whatever their age: a bound on memory at any request rate. */
export const KEEP_MAX_CLEARS = 100_000
/** How long a replay waits for the store to serve again (a failover's election, a restart's load). */
const REPLAY_WAIT_MS = 60_000
/** Clears sent at once while replaying. */
const REPLAY_BATCH = 64

/** What sending a write again found: the store had it (nothing moved), or had lost it (written now). */
export type Resent = 'kept' | 'restored'

/**
 * What the journal keeps: clears, and the video job records their clears need at retrieve (a job
 * whose record a failover lost is otherwise unknown to its buyer, and never charged).
 */
type Kept = 'clear' | 'video job'

/**
 * Where the store acknowledged a write: the masters ("host:port"; none where the store cannot say)
 * and a key on each slot it wrote, by which a loss finds it again if its slot moved since.
 */
export interface WrittenOn {
  masters: readonly string[]
  slots: readonly string[]
}

const NOWHERE: WrittenOn = { masters: [], slots: [] }

/** Where a write on `slots` (a key on each) goes now, as the store's client knows its masters. */
export function writtenOn(store: Pick<Store, 'masterOf'>, slots: readonly string[]): WrittenOn {
  return { slots, masters: mastersOf(store, slots) }
}

interface Entry {
  at: number
  what: Kept
  id: string
  resend: () => Promise<Resent>
  slots: readonly string[]
  /** How many masters' queues still keep it. */
  keptBy: number
  /** Counted once as forgotten before a replica had it. */
  counted: boolean
}

/**
 * Where the store does not say which master a write went to (a single server, a Sentinel group, a
 * Cluster whose slots the client does not know yet): kept until every master's replicas have it,
 * and sent again whichever connection closes.
 */
const ANY_MASTER = ''
const ON_ANY_MASTER = [ANY_MASTER]

/** One master's writes in the order they were acknowledged (a master replicates in that order). */
class MasterQueue {
  entries: Entry[] = []
  head = 0

  get size(): number {
    return this.entries.length - this.head
  }

  get oldest(): Entry | undefined {
    return this.entries[this.head]
  }

  /** Forgotten from the front; compacted once the forgotten part is the larger (each entry moved once). */
  shift(): Entry {
    const entry = this.entries[this.head++]!
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head)
      this.head = 0
    }
    return entry
  }

  kept(): Entry[] {
    return this.entries.slice(this.head)
  }
}

const REPLAYED = { clear: metrics.replayedClears, 'video job': metrics.replayedVideoJobs }

export interface JournalOptions {
  windowMs?: number
  keepUnreplicatedMs?: number
  keepMaxClears?: number
  /**
   * Every write `master` acknowledged before this time is on its replicas (ANY_MASTER: on every
   * master's). None: the window alone.
   */
  replicatedBefore?: (master: string) => number
  /**
   * The master serving a key's slot now: a loss also sends again what was acknowledged elsewhere
   * on a slot that master serves since (a slot moved, its keys with it). None: by master alone.
   */
  masterOf?: (key: string) => string | undefined
  now?: () => number
}

export class ClearJournal {
  private queues = new Map<string, MasterQueue>()
  private kept = 0
  private replaying: Promise<void> | null = null
  /** The masters whose connection closed since the replay under way began (ANY_MASTER: all of them). */
  private lostSince = new Set<string>()
  private stopped = false
  private readonly windowMs: number
  private readonly keepMs: number
  private readonly keepMax: number
  private readonly replicatedBefore: (master: string) => number
  private readonly masterOf: ((key: string) => string | undefined) | undefined
  private readonly now: () => number

  constructor(
    private readonly clear: (attempt: AttemptRef, req: ClearArgs) => Promise<Clearing>,
    private readonly logger: Logger,
    options: JournalOptions = {},
  ) {
    this.windowMs = options.windowMs ?? JOURNAL_MS
    this.keepMs = options.keepUnreplicatedMs ?? KEEP_UNREPLICATED_MS
    this.keepMax = options.keepMaxClears ?? KEEP_MAX_CLEARS
    this.replicatedBefore = options.replicatedBefore ?? (() => Number.POSITIVE_INFINITY)
    this.masterOf = options.masterOf
    this.now = options.now ?? Date.now
  }

  /** A clear the store acknowledged. */
  record(attempt: AttemptRef, req: ClearArgs, written: WrittenOn = NOWHERE): void {
    this.keep(
      'clear',
      attempt.attemptId,
      async () => ((await this.clear(attempt, req)).replay ? 'kept' : 'restored'),
      written,
    )
  }

  /** A video job's record the store acknowledged, and how to write it again if the store lost it. */
  recordVideoJob(jobId: string, restore: () => Promise<Resent>, written: WrittenOn = NOWHERE): void {
    this.keep('video job', jobId, restore, written)
  }

  private keep(what: Kept, id: string, resend: () => Promise<Resent>, written: WrittenOn): void {
    const now = this.now()
    this.forget(now)
    const on = written.masters.length > 0 ? written.masters : ON_ANY_MASTER
    const entry: Entry = {
      at: now,
      what,
      id,
      resend,
      slots: written.slots,
      keptBy: on.length,
      counted: false,
    }
    for (const master of on) {
      let queue = this.queues.get(master)
      if (!queue) {
        queue = new MasterQueue()
        this.queues.set(master, queue)
      }
      queue.entries.push(entry)
    }
    this.kept++
  }

  /** Writes kept now. */
  get held(): number {
    this.forget(this.now())
    return this.kept
  }

  /**
   * For each master it keeps writes of ('' for those of no known master), how long, in seconds, it
   * has kept the oldest its replicas have not acknowledged: 0 while all are within the window.
   */
  unreplicatedAges(): [string, number][] {
    const now = this.now()
    this.forget(now)
    const ages: [string, number][] = []
    for (const [master, queue] of this.queues) {
      const age = now - queue.oldest!.at
      ages.push([master, age > this.windowMs ? age / 1000 : 0])
    }
    return ages
  }

  /**
   * A connection to Redis closed: what that master acknowledged (and every write whose master is
   * not known) is sent again once it serves; everything kept when no master is named.
   */
  lost(master: string = ANY_MASTER): void {
    if (this.stopped) return
    this.lostSince.add(master)
    this.replaying ??= this.replay().finally(() => {
      this.replaying = null
    })
  }

  /** Resolves once a replay under way has ended (it stops waiting for the store); none starts after. */
  async stop(): Promise<void> {
    this.stopped = true
    await this.replaying
  }

  /** The replay under way, if any (tests wait for it). */
  get settled(): Promise<void> {
    return this.replaying ?? Promise.resolve()
  }

  private async replay(): Promise<void> {
    while (this.lostSince.size > 0 && !this.stopped) {
      const lost = this.lostSince
      this.lostSince = new Set()
      this.forget(this.now())
      const due = this.keptOn(lost)
      const counts = { kept: 0, restored: 0, failed: 0 }
      for (let i = 0; i < due.length && !this.stopped; i += REPLAY_BATCH) {
        await Promise.all(due.slice(i, i + REPLAY_BATCH).map((entry) => this.replayOne(entry, counts)))
      }
      if (counts.restored > 0 || counts.failed > 0)
        this.logger.warn(
          { ...counts, masters: [...lost] },
          'clears (and video job records) sent again after a connection to Redis closed: restored the lost, or failed',
        )
    }
  }

  /**
   * What the `lost` masters acknowledged, what went to no known master, and what lies on a slot a
   * lost master serves now, each once, oldest first.
   */
  private keptOn(lost: Set<string>): Entry[] {
    const due = new Set<Entry>()
    const masterOf = this.masterOf
    for (const [master, queue] of this.queues) {
      const all = lost.has(ANY_MASTER) || lost.has(master) || master === ANY_MASTER
      for (const entry of queue.kept()) {
        if (all || (masterOf && entry.slots.some((key) => lost.has(masterOf(key) ?? ANY_MASTER))))
          due.add(entry)
      }
    }
    return [...due].sort((a, b) => a.at - b.at)
  }

  private async replayOne(entry: Entry, counts: { kept: number; restored: number; failed: number }) {
    try {
      const found = await whileStoreAway(entry.resend, waitsFor(REPLAY_WAIT_MS), () => this.stopped)
      counts[found]++
      REPLAYED[entry.what].inc({ found })
    } catch (error) {
      counts.failed++
      REPLAYED[entry.what].inc({ found: 'failed' })
      if (!this.stopped)
        this.logger.error({ err: error, [entry.what]: entry.id }, `a ${entry.what} sent again failed`)
    }
  }

  /**
   * Each master forgets the writes past the window that its replicas have, and those past the
   * longest keep; then, beyond the most kept in all, the oldest of any master. What a master forgets
   * before its replicas had it is counted, once.
   */
  private forget(now: number): void {
    const oldest = now - this.keepMs
    for (const [master, queue] of this.queues) {
      const replicated = this.replicatedBefore(master)
      const since = Math.min(now - this.windowMs, replicated)
      while (queue.size > 0 && queue.oldest!.at < since) this.release(queue.shift())
      while (queue.size > 0 && queue.oldest!.at < oldest) this.giveUp(queue.shift(), replicated)
    }
    while (this.kept > this.keepMax) {
      let first: [string, MasterQueue] | undefined
      for (const pair of this.queues)
        if (pair[1].size > 0 && (!first || pair[1].oldest!.at < first[1].oldest!.at)) first = pair
      if (!first) break
      this.giveUp(first[1].shift(), this.replicatedBefore(first[0]))
    }
    // A master failed over or removed leaves an empty queue behind: not kept.
    for (const [master, queue] of this.queues) if (queue.size === 0) this.queues.delete(master)
  }

  /** Forgets a write its master's replicas may not have (acknowledged at or after `replicated`). */
  private giveUp(entry: Entry, replicated: number): void {
    if (entry.at >= replicated && !entry.counted) {
      entry.counted = true
      metrics.unreplicatedClears.inc()
    }
    this.release(entry)
  }

  private release(entry: Entry): void {
    if (--entry.keptBy === 0) this.kept--
  }
}
