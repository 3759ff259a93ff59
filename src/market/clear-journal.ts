// The clears this replica had acknowledged and Redis may not have kept yet, sent again when a
// connection to Redis closes. Redis acknowledges a write before its replicas have it (replication
// is asynchronous) and before its disk does (an AOF fsynced once a second): a master killed after a
// clear its replicas never got leaves a promoted replica, or a restarted server, without it, and the
// buyer told a cost it was never charged. A clear is kept for the window below and, on a master
// that has replicas, until they have it (src/redis/replication-watch.ts), however long their link
// lags. A clear is idempotent by attempt id, so sending it again is safe either way: one the store
// kept answers as a replay and changes nothing; one it lost is charged now (its attempt admitted,
// reaped by then, or lost with its admission: lua/clear.lua).
import type { Logger } from 'pino'
import { metrics } from '../metrics/gateway-metrics.ts'
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

interface Entry {
  at: number
  what: Kept
  id: string
  resend: () => Promise<Resent>
}

const REPLAYED = { clear: metrics.replayedClears, 'video job': metrics.replayedVideoJobs }

export interface JournalOptions {
  windowMs?: number
  keepUnreplicatedMs?: number
  keepMaxClears?: number
  /** Every write acknowledged before this time is on its master's replicas (none: the window alone). */
  replicatedBefore?: () => number
  now?: () => number
}

export class ClearJournal {
  private entries: Entry[] = []
  private head = 0
  private replaying: Promise<void> | null = null
  private lostAgain = false
  private stopped = false
  private readonly windowMs: number
  private readonly keepMs: number
  private readonly keepMax: number
  private readonly replicatedBefore: () => number
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
    this.now = options.now ?? Date.now
  }

  /** A clear the store acknowledged. */
  record(attempt: AttemptRef, req: ClearArgs): void {
    this.keep('clear', attempt.attemptId, async () =>
      (await this.clear(attempt, req)).replay ? 'kept' : 'restored',
    )
  }

  /** A video job's record the store acknowledged, and how to write it again if the store lost it. */
  recordVideoJob(jobId: string, restore: () => Promise<Resent>): void {
    this.keep('video job', jobId, restore)
  }

  private keep(what: Kept, id: string, resend: () => Promise<Resent>): void {
    const now = this.now()
    this.forget(now)
    this.entries.push({ at: now, what, id, resend })
  }

  /** Writes kept now. */
  get held(): number {
    this.forget(this.now())
    return this.entries.length - this.head
  }

  /** A connection to Redis closed: the clears kept are sent again once it serves. */
  lost(): void {
    if (this.stopped) return
    if (this.replaying) {
      this.lostAgain = true
      return
    }
    this.replaying = this.replay().finally(() => {
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
    do {
      this.lostAgain = false
      this.forget(this.now())
      const due = this.entries.slice(this.head)
      const counts = { kept: 0, restored: 0, failed: 0 }
      for (let i = 0; i < due.length && !this.stopped; i += REPLAY_BATCH) {
        await Promise.all(due.slice(i, i + REPLAY_BATCH).map((entry) => this.replayOne(entry, counts)))
      }
      if (counts.restored > 0 || counts.failed > 0)
        this.logger.warn(
          counts,
          'clears (and video job records) sent again after a connection to Redis closed: restored the lost, or failed',
        )
    } while (this.lostAgain && !this.stopped)
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
   * Forgets the clears past the window that the replicas have, then the oldest past the longest
   * keep or beyond the most kept (those the replicas had not acknowledged counted).
   */
  private forget(now: number): void {
    const entries = this.entries
    const replicated = this.replicatedBefore()
    const since = Math.min(now - this.windowMs, replicated)
    while (this.head < entries.length && entries[this.head]!.at < since) this.head++
    const oldest = now - this.keepMs
    while (
      this.head < entries.length &&
      (entries[this.head]!.at < oldest || entries.length - this.head > this.keepMax)
    ) {
      if (entries[this.head]!.at >= replicated) metrics.unreplicatedClears.inc()
      this.head++
    }
    // Compacted once the forgotten part is the larger: each entry is moved at most once.
    if (this.head > 1024 && this.head * 2 > entries.length) {
      this.entries = entries.slice(this.head)
      this.head = 0
    }
  }
}
