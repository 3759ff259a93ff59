// How far every master's replicas have caught up, read from ROLE a few times a second: a master
// reports its replication offset and each replica's acknowledged offset, so a write acknowledged
// before a ROLE was sent is on every replica once their acknowledged offsets pass the offset that
// ROLE reported (the master runs one command at a time, in the order its replicas receive them).
// The clear journal keeps a clear until then: a failover promotes a replica, and what it lacks is
// lost.
import { masterName } from './cluster-lane.ts'
import type { Commands } from './store.ts'

/**
 * How often ROLE is read on each master. Replicas acknowledge once a second on their own, so a clear
 * is confirmed within about two seconds: inside the journal's window, which keeps it that long anyway.
 */
export const WATCH_INTERVAL_MS = 500

type Master = Pick<Commands, 'call'>

/** A server's answer that it will not run ROLE, as against a connection that failed. */
const REFUSED = /unknown command|NOPERM|not allowed|disabled/i

interface Sample {
  sentAt: number
  offset: number
}

interface MasterState {
  /** Whether a replica was ever seen: a master that had one and has none now is cut off from it. */
  hadReplicas: boolean
  /** ROLE samples not yet acknowledged by every replica, oldest first. */
  samples: Sample[]
  /** Writes acknowledged before this time are on every replica this master has. */
  before: number
}

export class ReplicationWatch {
  private states = new Map<Master, MasterState>()
  /** By name, each master's `before` as last read. */
  private byName = new Map<string, number>()
  private timer: ReturnType<typeof setInterval> | null = null
  private reading: Promise<void> | null = null
  private confirmed = 0

  constructor(
    private readonly masters: () => Promise<Master[]>,
    private readonly keepMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Every write `master` ("host:port") acknowledged before this time is on its replicas, or it has
   * never had one (then only the journal's own window keeps it: a restart's unsynced disk). A master
   * not named, or not read (failed over, not known yet): what holds for every master.
   */
  replicatedBefore(master = ''): number {
    return this.byName.get(master) ?? this.confirmed
  }

  /** Reads now, then every `intervalMs` while `wanted` (an idle gateway, keeping nothing, reads nothing). */
  start(wanted: () => boolean = () => true, intervalMs = WATCH_INTERVAL_MS): void {
    if (this.timer) return
    void this.read()
    this.timer = setInterval(() => {
      if (wanted()) void this.read()
    }, intervalMs)
    this.timer.unref?.()
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }

  /** One reading of every master (tests call it; the timer does otherwise). */
  read(): Promise<void> {
    this.reading ??= this.readAll().finally(() => {
      this.reading = null
    })
    return this.reading
  }

  private async readAll(): Promise<void> {
    let masters: Master[]
    try {
      masters = await this.masters()
    } catch {
      return
    }
    // None to read (the store away): what was confirmed stays confirmed.
    if (masters.length === 0) return
    const states = new Map<Master, MasterState>()
    const byName = new Map<string, number>()
    const befores = await Promise.all(
      masters.map(async (master) => {
        const state = this.states.get(master) ?? { hadReplicas: false, samples: [], before: 0 }
        states.set(master, state)
        await this.readOne(master, state)
        const name = masterName(master)
        if (name !== '') byName.set(name, state.before)
        return state.before
      }),
    )
    // A master no longer listed (failed over, removed) is forgotten: its loss closed a connection,
    // and the journal sent its clears again.
    this.states = states
    this.byName = byName
    this.confirmed = Math.min(...befores)
  }

  private async readOne(master: Master, state: MasterState): Promise<void> {
    const sentAt = this.now()
    let role: unknown[]
    try {
      role = (await master.call('ROLE')) as unknown[]
    } catch (error) {
      // A server that refuses ROLE (renamed or denied, as some hosted ones do) says nothing of its
      // replicas: its clears are kept for the journal's window alone, as on a master without them.
      if (REFUSED.test((error as Error).message)) state.before = sentAt
      return
    }
    // A replica (a master demoted under us) confirms nothing until the client finds the new master.
    if (role[0] !== 'master') return
    const offset = Number(role[1])
    const replicas = (role[2] ?? []) as unknown[][]
    if (replicas.length > 0) state.hadReplicas = true
    if (!state.hadReplicas) {
      state.before = sentAt
      return
    }
    const samples = state.samples
    // An offset behind the last one read is a new history (a restarted server, a promoted replica
    // on another): what was read of the old one can confirm nothing.
    if (samples.length > 0 && offset < samples[samples.length - 1]!.offset) samples.length = 0
    samples.push({ sentAt, offset })
    // Past the journal's longest keep a sample can confirm nothing it still holds.
    while (samples.length > 1 && samples[0]!.sentAt < sentAt - this.keepMs) samples.shift()
    if (replicas.length === 0) return
    let acked = Number.POSITIVE_INFINITY
    for (const replica of replicas) acked = Math.min(acked, Number(replica[2]))
    while (samples.length > 0 && samples[0]!.offset <= acked) state.before = samples.shift()!.sentAt
  }
}
