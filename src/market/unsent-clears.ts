// The clears of answers already sent to the buyer (a stream's content) that Redis never answered:
// the store was away past the clear's wait. Without them the attempt's lease is reaped and the buyer
// keeps what was sent for nothing. This replica sends each again while it runs, once the store
// serves; what is still unsent when it stops is written to the journal's directory
// (SVC_JOURNAL_DIR), and the next gateway to start on that directory sends it. A clear is
// idempotent by attempt id (a second one is a replay that moves nothing; one after the reaper
// charges late: lua/clear.lua), so a file sent twice charges once.
import { randomUUID } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import { isRedisUnavailable, isStoreClosed } from '../redis/connection.ts'
import { waitsFor, whileStoreAway } from '../redis/store-retry.ts'
import type { Clearing } from './clearing.ts'
import type { AttemptRef, ClearArgs } from './steps.ts'

/** How long a clear sent again waits for the store between its tries, while this replica runs. */
const RESEND_WAIT_MS = 3_600_000
const FILE_PREFIX = 'unsent-clears-'

interface Unsent {
  attempt: AttemptRef
  req: ClearArgs
  /** When it was kept, ms: its attempt's record is kept at least the record retention from then. */
  keptAt: number
}

/** What a clear needs of its attempt: ids and what admit answered, never the supplier's URL or key. */
const REF_FIELDS = [
  'attemptId',
  'accountId',
  'offerId',
  'model',
  'upstreamGen',
  'apiKeyId',
  'askCents',
  'holdUsdc',
  'holdDiem',
  'requestId',
] as const satisfies readonly (keyof AttemptRef)[]

function refOf(attempt: AttemptRef): AttemptRef {
  return Object.fromEntries(REF_FIELDS.map((field) => [field, attempt[field]])) as unknown as AttemptRef
}

export class UnsentClears {
  private readonly unsent = new Map<string, Unsent>()
  private readonly sending = new Set<Promise<void>>()
  /** Files of earlier stops this replica took: removed once what they held is sent or written again. */
  private claimed: string[] = []
  private stopped = false
  /** Attempts whose clears a claimed file holds: still in it if this stop cannot write them again. */
  private readonly fromFiles = new Set<string>()
  private lostCount = 0

  constructor(
    private readonly clear: (attempt: AttemptRef, req: ClearArgs) => Promise<Clearing>,
    private readonly logger: Logger,
    private readonly dir: string | undefined,
    private readonly name: string,
  ) {}

  /** Unsent now (sent again in the background). */
  get size(): number {
    return this.unsent.size
  }

  /** A delivered answer's clear that found no store: sent again until the store answers it. */
  keep(attempt: AttemptRef, req: ClearArgs, keptAt = Date.now()): void {
    if (this.unsent.has(attempt.attemptId)) return
    const entry = { attempt: refOf(attempt), req, keptAt }
    // One that fails as the stop closes the store under it: written out on its own at once.
    if (this.stopped) {
      this.writeOut([entry], `${FILE_PREFIX}${this.name}-${randomUUID()}.jsonl`)
      return
    }
    this.unsent.set(attempt.attemptId, entry)
    this.send(entry)
  }

  /** Clears of delivered answers this replica neither sent nor wrote to the directory. */
  get lost(): number {
    return this.lostCount
  }

  /** Sends what the directory holds from earlier stops (this replica's, or any other's on it). */
  sendKept(): void {
    if (!this.dir) return
    mkdirSync(this.dir, { recursive: true })
    for (const file of readdirSync(this.dir)) {
      if (!file.startsWith(FILE_PREFIX) || file.endsWith('.tmp')) continue
      // Claimed by a rename, so that two gateways starting on one directory do not both take it.
      const claimed = join(this.dir, `${FILE_PREFIX}${this.name}.sending-${randomUUID()}`)
      try {
        renameSync(join(this.dir, file), claimed)
      } catch {
        continue
      }
      this.claimed.push(claimed)
      const lines = readFileSync(claimed, 'utf8').split('\n')
      let clears = 0
      for (const line of lines) {
        if (line === '') continue
        try {
          const entry = JSON.parse(line) as Unsent
          // Past the record retention its attempt's record may be gone, and the clear would be
          // charged again as an admission the store lost: never sent.
          const retention = entry.req.recordRetentionMs ?? DEFAULT_RECORD_RETENTION_MS
          if (!(Date.now() - entry.keptAt < retention)) {
            this.logger.error(
              { file, attemptId: entry.attempt.attemptId },
              'a kept clear past the record retention is not sent',
            )
            continue
          }
          this.keep(entry.attempt, entry.req, entry.keptAt)
          this.fromFiles.add(entry.attempt.attemptId)
          clears++
        } catch (error) {
          this.logger.error({ file, err: (error as Error).message }, 'a kept clear could not be read')
        }
      }
      this.logger.info({ file, clears }, 'sending clears an earlier stop kept')
    }
    this.forgetClaimed()
  }

  /** Once nothing is unsent, the files it came from hold nothing more. */
  private forgetClaimed(): void {
    if (this.unsent.size > 0) return
    for (const file of this.claimed) rmSync(file, { force: true })
    this.claimed = []
    this.fromFiles.clear()
  }

  private send(entry: Unsent): void {
    const sent = whileStoreAway(
      () => this.clear(entry.attempt, entry.req),
      waitsFor(RESEND_WAIT_MS),
      () => this.stopped,
    )
      .then(
        (clearing) => {
          this.unsent.delete(entry.attempt.attemptId)
          this.logger.warn(
            { attemptId: entry.attempt.attemptId, replay: clearing.replay, charged: clearing.charged },
            'a clear Redis had not answered was sent again',
          )
        },
        (error) => {
          // The store closed under it (a stop under a Redis that never answers): written at the stop.
          if (this.stopped || isStoreClosed(error)) return
          // Redis away past every wait: still owed, so sent again.
          if (isRedisUnavailable(error)) return this.send(entry)
          // Refused by its script: sending it again would be refused again; nothing was charged.
          this.unsent.delete(entry.attempt.attemptId)
          this.logger.error(
            { attemptId: entry.attempt.attemptId, err: (error as Error).message },
            'a clear Redis had not answered was refused when sent again',
          )
        },
      )
      .finally(() => {
        this.sending.delete(sent)
        if (!this.stopped) this.forgetClaimed()
      })
    this.sending.add(sent)
  }

  /**
   * Stops sending, and writes what is still unsent to the directory for the next start (with no
   * directory, or one it cannot write, it is lost: the leases are reaped, nothing charged). Returns
   * how many were kept and how many lost.
   */
  async stop(): Promise<{ kept: number; lost: number }> {
    this.stopped = true
    await Promise.all(this.sending)
    const left = [...this.unsent.values()]
    if (left.length === 0) {
      this.forgetClaimed()
      return { kept: 0, lost: 0 }
    }
    if (this.writeOut(left, `${FILE_PREFIX}${this.name}.jsonl`, this.fromFiles)) {
      for (const claimed of this.claimed) rmSync(claimed, { force: true })
      return { kept: left.length, lost: 0 }
    }
    const lost = left.filter((entry) => !this.fromFiles.has(entry.attempt.attemptId)).length
    return { kept: left.length - lost, lost }
  }

  /**
   * Writes `entries` to the directory as `name`, whole, then renamed (a start never reads half a
   * file). False, logged and counted lost, with no directory or when the write fails; what
   * `stillFiled` names is left in the files it came from, and is not lost.
   */
  private writeOut(entries: Unsent[], name: string, stillFiled: ReadonlySet<string> = new Set()): boolean {
    const attempts = entries.map((entry) => entry.attempt.attemptId)
    const lost = attempts.filter((attempt) => !stillFiled.has(attempt)).length
    if (!this.dir) {
      this.lostCount += lost
      this.logger.error(
        { lost, attempts },
        'stopping with clears Redis never answered and no SVC_JOURNAL_DIR: their leases are reaped, nothing charged',
      )
      return false
    }
    const file = join(this.dir, name)
    try {
      mkdirSync(this.dir, { recursive: true })
      writeFileSync(`${file}.tmp`, `${entries.map((entry) => JSON.stringify(entry)).join('\n')}\n`)
      renameSync(`${file}.tmp`, file)
    } catch (error) {
      try {
        rmSync(`${file}.tmp`, { force: true })
      } catch {
        // No directory to hold it either.
      }
      this.lostCount += lost
      this.logger.error(
        { lost, attempts, file, err: (error as Error).message },
        'stopping with clears Redis never answered that SVC_JOURNAL_DIR could not take: their leases are reaped, nothing charged',
      )
      return false
    }
    this.logger.warn(
      { kept: entries.length, file, attempts },
      'stopping with clears Redis never answered: kept for the next start on this directory',
    )
    return true
  }
}
