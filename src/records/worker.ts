// The write-behind worker. Every replica runs one; all of them are consumers of one group on the
// attempts:ended stream, so each entry is copied by one of them. A batch is read (XREADGROUP),
// copied into request records and stats (lua/record-attempt.lua, which copies an entry at most
// once), then acknowledged. What a dead consumer read but never acknowledged is claimed by another
// after claimIdleMs (XAUTOCLAIM). The stream is trimmed by retention, never past an entry the group
// has not copied.
import { hostname } from 'node:os'
import type Redis from 'ioredis'
import type { Logger } from 'pino'
import type { Keyspace } from '../redis/keys.ts'
import { entryTime, parseEndedAttempt } from './attempt-record.ts'
import { utcDay } from './days.ts'

export const RECORDS_GROUP = 'records'
/** Stats buckets outlive the longest window (30 days) by a margin. */
const STATS_TTL_SECONDS = 32 * 86_400

export interface WorkerOptions {
  /** This consumer's name in the group; unique per process. */
  consumer: string
  batchSize: number
  /** How long one read waits for new entries (a new entry wakes it at once). */
  blockMs: number
  claimIdleMs: number
  streamRetentionMs: number
  recordRetentionDays: number
  /** A consumer with nothing pending, silent this long, is removed from the group (a replica gone). */
  forgetIdleMs?: number
}

const FORGET_IDLE_MS = 86_400_000

export type StreamEntry = [id: string, fields: string[] | null]

export function consumerName(): string {
  return `${hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`
}

/** Orders two stream ids (`<ms>-<seq>`). */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(Number) as [number, number]
  const [bm, bs] = b.split('-').map(Number) as [number, number]
  return am === bm ? as - bs : am - bm
}

export class RecordsWorker {
  private claimCursor = '0-0'

  /** `redis` must be this worker's own connection: XREADGROUP blocks it. */
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keyspace,
    private readonly options: WorkerOptions,
    private readonly logger: Logger,
  ) {}

  async ensureGroup(): Promise<void> {
    try {
      await this.redis.xgroup('CREATE', this.keys.attemptsEnded, RECORDS_GROUP, '0', 'MKSTREAM')
    } catch (error) {
      if (!/BUSYGROUP/.test((error as Error).message)) throw error
    }
  }

  /** New entries for this consumer; waits up to blockMs when there are none. */
  async read(): Promise<StreamEntry[]> {
    const reply = (await this.redis.xreadgroup(
      'GROUP',
      RECORDS_GROUP,
      this.options.consumer,
      'COUNT',
      this.options.batchSize,
      'BLOCK',
      this.options.blockMs,
      'STREAMS',
      this.keys.attemptsEnded,
      '>',
    )) as [string, StreamEntry[]][] | null
    return reply?.[0]?.[1] ?? []
  }

  /** Entries another consumer left pending past claimIdleMs, now this consumer's. */
  async claim(): Promise<StreamEntry[]> {
    const [cursor, entries] = (await this.redis.xautoclaim(
      this.keys.attemptsEnded,
      RECORDS_GROUP,
      this.options.consumer,
      this.options.claimIdleMs,
      this.claimCursor,
      'COUNT',
      this.options.batchSize,
    )) as [string, StreamEntry[]]
    this.claimCursor = cursor
    return entries
  }

  /** Copies entries into records and stats, then acknowledges them. Returns how many were new. */
  async copy(entries: StreamEntry[]): Promise<number> {
    if (entries.length === 0) return 0
    const copied = await this.write(entries)
    await this.redis.xack(this.keys.attemptsEnded, RECORDS_GROUP, ...entries.map(([id]) => id))
    return copied
  }

  /** Writes entries into records and stats (not acknowledged yet). Returns how many were new. */
  async write(entries: StreamEntry[]): Promise<number> {
    const pipeline = this.redis.pipeline()
    let queued = 0
    for (const [id, fields] of entries) {
      const ended = fields ? parseEndedAttempt(id, fields) : null
      if (!ended) {
        if (fields) this.logger.warn({ entryId: id }, 'skipping a stream entry that is not an ended attempt')
        continue
      }
      const args = [
        ended.supportReference,
        ended.record.n,
        ended.record.end,
        JSON.stringify(ended.record),
        ended.accountId,
        ended.requestId,
        ended.model,
        utcDay(entryTime(id)),
        this.options.recordRetentionDays * 86_400,
        STATS_TTL_SECONDS,
      ]
      ;(pipeline as unknown as Record<string, (...a: unknown[]) => unknown>).recordAttempt!(
        this.keys.base,
        ...args,
      )
      queued++
    }
    let copied = 0
    if (queued > 0) {
      for (const [error, result] of (await pipeline.exec()) ?? []) {
        if (error) throw error
        copied += Number(result)
      }
    }
    return copied
  }

  /** One pass: what dead consumers left, then what is new. */
  async step(): Promise<number> {
    const claimed = await this.claim()
    let copied = await this.copy(claimed)
    copied += await this.copy(await this.read())
    return copied
  }

  /** Drops entries past retention, but none the group has not delivered and acknowledged. */
  async trim(): Promise<void> {
    const stream = this.keys.attemptsEnded
    const [seconds, micros] = await this.redis.time()
    let minId = `${Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - this.options.streamRetentionMs}-0`
    const groups = (await this.redis.xinfo('GROUPS', stream)) as unknown[][]
    const group = groups.find((g) => g[g.indexOf('name') + 1] === RECORDS_GROUP)
    if (!group) return
    const delivered = String(group[group.indexOf('last-delivered-id') + 1])
    if (compareIds(delivered, minId) < 0) minId = delivered
    const [pendingCount, oldestPending] = (await this.redis.xpending(stream, RECORDS_GROUP)) as [
      number,
      string | null,
    ]
    if (pendingCount > 0 && oldestPending && compareIds(oldestPending, minId) < 0) minId = oldestPending
    await this.redis.xtrim(stream, 'MINID', minId)
    await this.forgetGoneConsumers()
  }

  /** Every start of a replica joins as a new consumer; those long gone with nothing pending leave. */
  private async forgetGoneConsumers(): Promise<void> {
    const stream = this.keys.attemptsEnded
    const consumers = (await this.redis.xinfo('CONSUMERS', stream, RECORDS_GROUP)) as unknown[][]
    for (const c of consumers) {
      const field = (name: string) => c[c.indexOf(name) + 1]
      const name = String(field('name'))
      const gone =
        Number(field('pending')) === 0 &&
        Number(field('idle')) > (this.options.forgetIdleMs ?? FORGET_IDLE_MS)
      if (gone && name !== this.options.consumer)
        await this.redis.xgroup('DELCONSUMER', stream, RECORDS_GROUP, name)
    }
  }
}

export interface RunningWorker {
  worker: RecordsWorker
  stop(): Promise<void>
}

/**
 * Runs a worker until stopped: copy passes back to back, a trim every trimIntervalMs. The group
 * exists when this returns (unless Redis refused; the loop then retries), so a replica's keyspace
 * is complete once it has started.
 */
export async function runWorker(
  redis: Redis,
  keys: Keyspace,
  options: WorkerOptions,
  logger: Logger,
  trimIntervalMs = 60_000,
): Promise<RunningWorker> {
  const worker = new RecordsWorker(redis, keys, options, logger)
  await worker.ensureGroup().catch(() => {})
  let running = true
  const loop = (async () => {
    let lastTrim = 0
    while (running) {
      try {
        await worker.ensureGroup()
        while (running) {
          await worker.step()
          if (Date.now() - lastTrim >= trimIntervalMs) {
            lastTrim = Date.now()
            await worker.trim()
          }
        }
      } catch (error) {
        if (!running) break
        logger.warn({ err: (error as Error).message }, 'records worker pass failed; retrying')
        await Bun.sleep(1_000)
      }
    }
  })()
  return {
    worker,
    async stop() {
      running = false
      // The blocked read ends with the connection.
      redis.disconnect()
      await loop
    },
  }
}
