// The market's knobs from the environment; config.ts loads them with the rest.
import { type Env, integer, read } from './config-env.ts'
import type { Every } from './timing/every.ts'

/** Admission, leases and clearing: the market's knobs. */
export interface MarketConfig {
  /** A request's lease; the relay renews it while bytes flow, the reaper takes it after. */
  leaseMs: number
  reapIntervalMs: number
  /** Completions in flight per API key (429 key_concurrency_limit past it). */
  keyMaxInFlight: number
  /** Requests in flight per wallet (429 buyer_concurrency_limit past it). */
  walletMaxInFlight: number
  /** Platform fee on each clear, basis points; the supplier earns the rest. */
  feeBps: number
  /** How long a request waits for a busy supplier key before 503 key_wait_timeout. */
  keyWaitMs: number
  /** How long an offer sits out after its upstream failed before any byte. */
  cooldownMs: number
  /**
   * The least remaining capacity (micro-DIEM) an offer stands on the ladder with, and the least
   * capacity one may be posted with: an offer with less left stands aside (lua/lib/ladder.lua).
   */
  minRoutable: number
  /** Held apart: how long a clear's post may wait for a reservation to carry it (market/post-queue.ts). */
  postWithinMs: number
  /**
   * Replicas each master must have a clear on before its cost is told (0: told once the master
   * acknowledges it), and how long a clear waits for them before it is told anyway.
   */
  clearReplicas: number
  clearReplicasWaitMs: number
  /** Where a stop leaves the clears of delivered answers Redis never answered, for the next start. */
  journalDir?: string
  /** What runs the lease renewer and the reaper (a timer unless a test drives them). */
  every?: Every
  /** The clock a key wait's deadline is counted on (ms); unset, the wall clock. Tests set it. */
  keyWaitClock?: () => number
}

/** SVC_REAP_INTERVAL_MS: how often each replica's reaper runs (and stamps the replica as seen). */
export function reapIntervalMs(env: Env = process.env): number {
  return integer(env, 'SVC_REAP_INTERVAL_MS', 1_000, 50, 60_000)
}

export function loadMarketConfig(env: Env): MarketConfig {
  return {
    leaseMs: integer(env, 'SVC_LEASE_SECONDS', 30, 5, 3_600) * 1000,
    reapIntervalMs: reapIntervalMs(env),
    keyMaxInFlight: integer(env, 'SVC_KEY_MAX_IN_FLIGHT', 32, 1, 100_000),
    walletMaxInFlight: integer(env, 'SVC_WALLET_MAX_IN_FLIGHT', 64, 1, 100_000),
    feeBps: integer(env, 'SVC_FEE_BPS', 0, 0, 10_000),
    keyWaitMs: integer(env, 'SVC_KEY_WAIT_MS', 2_000, 0, 60_000),
    cooldownMs: integer(env, 'SVC_OFFER_COOLDOWN_MS', 5_000, 0, 600_000),
    // At most lua/lib/ladder.lua's DRY_CAP: an offer with that much left is never read for it.
    minRoutable: integer(env, 'SVC_MIN_ROUTABLE_MICRO_DIEM', 10_000, 0, 1_000_000),
    postWithinMs: integer(env, 'SVC_POST_WITHIN_MS', 2, 1, 600_000),
    clearReplicas: integer(env, 'SVC_CLEAR_REPLICAS', 0, 0, 16),
    clearReplicasWaitMs: integer(env, 'SVC_CLEAR_REPLICAS_WAIT_MS', 100, 1, 10_000),
    journalDir: read(env, 'SVC_JOURNAL_DIR'),
  }
}
