// Clears told only once replicas have them (SVC_CLEAR_REPLICAS): every caller waits for one WAIT
// on each master its clear wrote on (every master, where the store cannot say which), begun after
// its own write was acknowledged. Callers that arrive while one is under way share the next, as a
// database's group commit shares a disk flush, so the store sees one marker and one WAIT per master
// per round, not per request. Each master has rounds of its own: one whose replica is down or lags
// holds back the clears it wrote, not every clear.
import type { Logger } from 'pino'
import type { Store } from './store.ts'

export type BarrierOutcome = 'replicated' | 'timed_out' | 'failed'

/** A round that fell short is logged at most this often (the metric counts every one). */
const WARN_EVERY_MS = 10_000

/** The rounds of waits on every master, for callers whose masters are not known. */
const EVERY_MASTER = ''

/** Worst first: a clear told on any master's shortfall is told short. */
const OUTCOMES: BarrierOutcome[] = ['failed', 'timed_out', 'replicated']

/** One master's rounds (or every master's): the one under way, and the next that callers joined. */
class Rounds {
  private current: Promise<BarrierOutcome> | null = null
  private next: Promise<BarrierOutcome> | null = null

  constructor(private readonly round: () => Promise<BarrierOutcome>) {}

  passed(): Promise<BarrierOutcome> {
    if (!this.current) return this.start()
    // The round under way may have sent its marker before this caller's write: wait for the next.
    this.next ??= this.current.then(() => {
      this.next = null
      return this.start()
    })
    return this.next
  }

  private start(): Promise<BarrierOutcome> {
    const round = this.round().finally(() => {
      if (this.current === round) this.current = null
    })
    this.current = round
    return round
  }
}

export class ReplicaBarrier {
  private rounds = new Map<string, Rounds>()
  private warnedAt = 0

  constructor(
    private readonly store: Pick<Store, 'waitReplicas'>,
    private readonly replicas: number,
    private readonly waitMs: number,
    private readonly logger?: Logger,
  ) {}

  /**
   * Resolves once what the store acknowledged before this call is on the replicas of `masters`
   * ("host:port"; none named: of every master), or not in time.
   */
  async passed(masters: readonly string[] = []): Promise<BarrierOutcome> {
    if (masters.length <= 1) return this.on(masters[0] ?? EVERY_MASTER).passed()
    const outcomes = await Promise.all(masters.map((master) => this.on(master).passed()))
    return OUTCOMES.find((outcome) => outcomes.includes(outcome))!
  }

  private on(master: string): Rounds {
    let rounds = this.rounds.get(master)
    if (!rounds) {
      rounds = new Rounds(() => this.round(master))
      this.rounds.set(master, rounds)
    }
    return rounds
  }

  private async round(master: string): Promise<BarrierOutcome> {
    let counts: number[]
    try {
      counts = await this.store.waitReplicas(
        this.replicas,
        this.waitMs,
        master === EVERY_MASTER ? undefined : [master],
      )
    } catch (error) {
      this.warn(
        { err: (error as Error).message },
        'clears told without waiting for replicas: the wait failed',
      )
      return 'failed'
    }
    if (counts.every((count) => count >= this.replicas)) return 'replicated'
    this.warn(
      { replicas: this.replicas, acknowledged: counts, waitMs: this.waitMs, master: master || 'every' },
      'clears told before enough replicas had them (SVC_CLEAR_REPLICAS): a replica is down or lagging',
    )
    return 'timed_out'
  }

  private warn(fields: object, message: string): void {
    const now = Date.now()
    if (now - this.warnedAt < WARN_EVERY_MS) return
    this.warnedAt = now
    this.logger?.warn(fields, message)
  }
}
