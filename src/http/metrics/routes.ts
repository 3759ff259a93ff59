// GET /metrics: Prometheus text, behind the operator token (it tells holds and traffic). Counters
// and histograms come from this process; holds outstanding and Redis latency are read at scrape.
import { Elysia } from 'elysia'
import type { ClearJournal } from '../../market/clear-journal.ts'
import type { MarketSteps } from '../../market/steps.ts'
import type { UnsentClears } from '../../market/unsent-clears.ts'
import { metrics } from '../../metrics/gateway-metrics.ts'
import { renderGauge, renderLabelledGauge } from '../../metrics/registry.ts'
import type { Keyspace } from '../../redis/keys.ts'
import type { Store } from '../../redis/store.ts'
import { adminAuth } from '../auth.ts'

export function metricsRoutes(deps: {
  store: Store
  keys: Keyspace
  steps: Pick<MarketSteps, 'holdsOutstanding'>
  config: { adminToken: string }
  journal?: Pick<ClearJournal, 'held' | 'unreplicatedAges'>
  unsent?: Pick<UnsentClears, 'size'>
}) {
  return new Elysia({ name: 'svc/metrics', seed: deps.keys.prefix })
    .use(adminAuth(deps.config.adminToken))
    .get(
      '/metrics',
      async () => {
        const started = performance.now()
        await deps.store.ping()
        const redisSeconds = (performance.now() - started) / 1000
        const holds = await deps.steps.holdsOutstanding()
        const text = [
          ...metrics.requests.render(),
          ...metrics.latency.render(),
          ...metrics.clears.render(),
          ...metrics.fallForwards.render(),
          ...metrics.reservations.render(),
          ...metrics.disputedClears.render(),
          ...metrics.disputedBurn.render(),
          ...metrics.costDisagreements.render(),
          ...metrics.lostAdmissions.render(),
          ...metrics.replayedClears.render(),
          ...metrics.replayedVideoJobs.render(),
          ...metrics.unreplicatedClears.render(),
          ...metrics.clearReplicaWaits.render(),
          ...metrics.unreadBalances.render(),
          ...renderGauge(
            'svc_holds_outstanding',
            'Admitted requests holding funds and capacity, all replicas',
            holds,
          ),
          ...renderGauge('svc_open_streams', 'Streams this process is relaying', metrics.openStreams.value),
          ...renderGauge(
            'svc_journal_clears',
            "Clears (and video job records) this process keeps to send again if Redis loses them: acknowledged in the last 2 s, or not yet acknowledged by their master's replicas",
            deps.journal?.held ?? 0,
          ),
          ...renderLabelledGauge(
            'svc_journal_unreplicated_seconds',
            'For each master this process keeps clears of (master="": of no known master), the age of the oldest its replicas have not acknowledged (0: none past the 2 s window): a master whose figure keeps growing has a replica falling behind',
            'master',
            deps.journal?.unreplicatedAges() ?? [],
          ),
          ...renderGauge(
            'svc_unsent_clears',
            'Clears of answers this process already delivered that Redis has not answered yet: sent again until it does, and at a stop written to SVC_JOURNAL_DIR (lost without it)',
            deps.unsent?.size ?? 0,
          ),
          ...renderGauge('svc_redis_ping_seconds', 'Round trip of one PING at scrape time', redisSeconds),
          ...payoutWalletGauges(),
        ].join('\n')
        return new Response(`${text}\n`, {
          headers: { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' },
        })
      },
      { admin: true },
    )
}

/** Present once the payout wallet's balances were read (payouts on). */
function payoutWalletGauges(): string[] {
  const { usdcMicros, gasWei } = metrics.payoutWallet
  if (usdcMicros === null || gasWei === null) return []
  return [
    ...renderGauge(
      'svc_payout_wallet_usdc_micros',
      "The payout wallet's USDC, micro-USDC, as last read",
      usdcMicros,
    ),
    ...renderGauge(
      'svc_payout_wallet_gas_wei',
      "The payout wallet's gas (ETH), wei, as last read",
      Number(gasWei),
    ),
  ]
}
