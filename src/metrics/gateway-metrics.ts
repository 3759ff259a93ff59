// The gateway's metrics, one instance per process, incremented where the event happens.
import { Counter, Histogram } from './registry.ts'

export const metrics = {
  requests: new Counter('svc_http_requests_total', 'HTTP requests by route template, method and status'),
  latency: new Histogram(
    'svc_http_request_duration_seconds',
    'Time to the response head, by route template (a stream is timed to its head)',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  ),
  clears: new Counter('svc_clears_total', 'Clears committed, by usage kind (metered or estimated)'),
  fallForwards: new Counter('svc_fall_forwards_total', 'Supplier failures before any byte, by code'),
  reservations: new Counter(
    'svc_reservations_total',
    "Held apart: reservations this process asked of offers, by outcome (taken, voided by the account's refusal, or the offer's refusal: full, unavailable, price, capacity, gone, away)",
  ),
  disputedClears: new Counter(
    'svc_disputed_clears_total',
    'Clears where the supplier reported more burn than could be billed (beyond what the request allows or the hold)',
  ),
  disputedBurn: new Counter(
    'svc_disputed_burn_microdiem_total',
    'Burn suppliers reported beyond what could be billed, micro-DIEM: recorded, never paid',
  ),
  costDisagreements: new Counter(
    'svc_upstream_cost_disagreements_total',
    "Clears where the upstream's own cost of the request differed from the metered burn",
  ),
  lostAdmissions: new Counter(
    'svc_lost_admissions_total',
    'Clears that found no admission (a failover to a Redis replica it never reached) and cleared it late from what admit answered',
  ),
  replayedClears: new Counter(
    'svc_replayed_clears_total',
    'Clears sent again after a connection to Redis closed, by what the store had: kept (a replay), restored (lost, charged now) or failed',
  ),
  replayedVideoJobs: new Counter(
    'svc_replayed_video_jobs_total',
    'Video job records written again after a connection to Redis closed, by what the store had: kept, restored (lost, written now) or failed',
  ),
  unreplicatedClears: new Counter(
    'svc_unreplicated_clears_total',
    "Clears forgotten by the clear journal before their master's replicas acknowledged them (a replica cut off for longer than the journal keeps a clear)",
  ),
  clearReplicaWaits: new Counter(
    'svc_clear_replica_waits_total',
    "Clears whose cost waited for the masters' replicas (SVC_CLEAR_REPLICAS), by outcome: replicated, timed_out (told anyway) or failed",
  ),
  unreadBalances: new Counter(
    'svc_upstream_balances_unread_total',
    "DIEM balances an upstream sent that could not be read (not a finite non-negative amount), kept as no balance, by where: answer (an answer's x-venice-balance-diem) or key_check (the key check's DIEM at an offer's post)",
  ),
  openStreams: { value: 0 },
  /** The payout wallet's balances as last read (src/payouts/balances.ts); null until read. */
  payoutWallet: { usdcMicros: null as number | null, gasWei: null as bigint | null },
}
