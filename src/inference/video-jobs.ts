// Video jobs: the hold is taken at queue time and lives until the job is retrieved (clear, on the
// first MP4), refunded (release: the supplier failed or rejected it) or expired (release). The
// job record ties the buyer's job id to its attempt and the supplier's queue id; the money moves
// only through the idempotent clear and release scripts, so racing polls charge once.
import { type Resent, type WrittenOn, writtenOn } from '../market/clear-journal.ts'
import type { MicroDiem, MicroUsdc } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

export type VideoJobState = 'queued' | 'completed' | 'refunded' | 'expired'

export interface VideoJob {
  id: string
  supportReference: string
  attemptId: string
  accountId: string
  model: string
  seconds: number
  /** The job's burn, micro-DIEM: its quote by the admitted key, rounded down (at most its hold). */
  burn: number
  /** The admission's hold, micro-DIEM: the catalog's quoted price. Absent on an earlier build's job (= burn). */
  holdDiem?: MicroDiem
  offerId: string
  upstreamBaseUrl: string
  /** Sealed, as on the offer. */
  upstreamKeyEnc: string
  /** The upstream key's balance before the job, micro-DIEM; -1 when unknown. */
  preBalance: number
  queueId: string
  state: VideoJobState
  createdAt: number
  expiresAt: number
  /**
   * The rest of what admit answered, so that the job's clear can carry its admission: a failover
   * that lost the admission (not this record, held apart on another master) is then charged at
   * retrieve (lua/clear.lua). Absent on jobs queued by an earlier build.
   */
  apiKeyId?: string
  askCents?: number
  holdUsdc?: MicroUsdc
  requestId?: string
  /** The offer's upstream generation admit answered: absent (an earlier build's job), no balance is recorded. */
  upstreamGen?: number
}

// Records outlive the job by a day, so a late poll still gets its 410 rather than a 404.
const KEEP_AFTER_EXPIRY_MS = 86_400_000

export class VideoJobs {
  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
  ) {}

  async create(job: VideoJob): Promise<void> {
    const key = this.keys.videoJob(job.id)
    await this.store
      .multi()
      .hset(key, { ...job })
      .pexpireat(key, job.expiresAt + KEEP_AFTER_EXPIRY_MS)
      .exec()
  }

  async get(id: string): Promise<VideoJob | null> {
    const raw = await this.store.hgetall(this.keys.videoJob(id))
    if (!raw.id) return null
    return {
      ...(raw as unknown as VideoJob),
      // The first outcome written wins (see settle); until then the job is queued.
      state: (raw.endedAs ?? raw.state) as VideoJobState,
      seconds: Number(raw.seconds),
      burn: Number(raw.burn),
      preBalance: Number(raw.preBalance),
      createdAt: Number(raw.createdAt),
      expiresAt: Number(raw.expiresAt),
      ...(raw.holdDiem !== undefined ? { holdDiem: Number(raw.holdDiem) as MicroDiem } : {}),
      ...(raw.askCents !== undefined ? { askCents: Number(raw.askCents) } : {}),
      ...(raw.holdUsdc !== undefined ? { holdUsdc: Number(raw.holdUsdc) as MicroUsdc } : {}),
      ...(raw.upstreamGen !== undefined ? { upstreamGen: Number(raw.upstreamGen) } : {}),
    }
  }

  /** Where job `id`'s record is written: its key, and the master that holds it (none where the store cannot say). */
  writtenOn(id: string): WrittenOn {
    return writtenOn(this.store, [this.keys.videoJob(id)])
  }

  /**
   * Writes a job's record again where the store lost it (a failover to a replica it never reached);
   * one the store has is left as it is.
   */
  async restore(job: VideoJob): Promise<Resent> {
    const key = this.keys.videoJob(job.id)
    if ((await this.store.exists(key)) === 1) return 'kept'
    await this.create(job)
    return 'restored'
  }

  /** Moves a queued job on; false when another poll moved it first. */
  async settle(id: string, state: Exclude<VideoJobState, 'queued'>): Promise<boolean> {
    // HSETNX: the first outcome written is the job's outcome, whatever races it.
    return (await this.store.hsetnx(this.keys.videoJob(id), 'endedAs', state)) === 1
  }
}
