// Starts one gateway replica: Redis, the catalog (synced now and on an interval), the HTTP app.
import type { Logger } from 'pino'
import { createApp } from './app.ts'
import { CatalogStore } from './catalog/store.ts'
import { startCatalogSync, syncCatalog } from './catalog/sync.ts'
import type { GatewayConfig } from './config.ts'
import { ClearJournal, KEEP_UNREPLICATED_MS } from './market/clear-journal.ts'
import { LeaseRenewer } from './market/lease-renewer.ts'
import { publishMinRoutable } from './market/min-routable.ts'
import { startReaper } from './market/reaper.ts'
import { earlierBuildSeen, forgetReplica, REPLICA_ID, stampReplica } from './market/replicas.ts'
import { marketSteps } from './market/steps.ts'
import { armTierSweep } from './market/tiers.ts'
import { UnsentClears } from './market/unsent-clears.ts'
import { startPayouts } from './payouts/start.ts'
import { keyspace } from './redis/keys.ts'
import { claimLayout } from './redis/layout.ts'
import { ReplicationWatch } from './redis/replication-watch.ts'
import { createStore } from './redis/store.ts'
import { startWebhookConsumer, WebhookConsumer } from './webhooks/consumer.ts'
import { webhookParts } from './webhooks/endpoints.ts'

/**
 * How long the attempts a stop closed the store under may take to end: their Redis calls fail at
 * once, but a cut stream counts its tokens first (a worker that may still be loading on a busy
 * host), and a clear failing after the stop's end would be neither kept nor counted lost.
 */
const CLOSED_SETTLE_MS = 5_000

/** What a stop left of the clears of answers delivered while Redis was away (unsent-clears.ts). */
export interface Stopped {
  /** Written to SVC_JOURNAL_DIR for the next start on it. */
  keptClears: number
  /** Neither committed nor written: never charged (the process's exit code says so: src/cli/serve.ts). */
  lostClears: number
}

export interface RunningGateway {
  url: string
  port: number
  /** Stops at once, cutting whatever is open (tests, the demo). */
  stop(): Promise<Stopped>
  /** Stops accepting, lets open requests and streams finish within `graceMs`, then stops. */
  drain(graceMs: number): Promise<Stopped>
  /** Resolves once the clears a lost connection to Redis sends again have been sent. */
  replaysSettled(): Promise<void>
}

export async function startGateway(config: GatewayConfig, logger: Logger): Promise<RunningGateway> {
  let lastReported = 0
  // Made once the steps are: a connection lost before then has no clear to send again.
  let journal: ClearJournal | undefined
  const store = createStore(config.redisUrl, {
    failFast: true,
    onLost: (master) => journal?.lost(master),
    onError: (error) => {
      // ioredis retries on its own; one line every few seconds says so without flooding the log.
      if (Date.now() - lastReported < 5_000) return
      lastReported = Date.now()
      logger.warn({ err: error.message }, 'redis unreachable; requests answer 503 until it is back')
    },
  })
  await store.whenReady(15_000)
  const keys = keyspace(config.redisPrefix, config.redisLayout)
  // Seen before the layout is read: a migration that records itself after this read finds the
  // replica when it looks for one, and puts the record back.
  await stampReplica(store, keys)
  try {
    await claimLayout(store, config.redisPrefix, config.redisLayout)
  } catch (error) {
    await forgetReplica(store, keys).catch(() => {})
    store.close()
    throw error
  }
  const source = {
    upstreamUrl: config.upstreamUrl,
    upstreamApiKey: config.upstreamApiKey,
    disabledModels: config.disabledModels,
  }
  const catalog: CatalogStore = new CatalogStore(store, keys, () => syncCatalog(catalog, source))
  try {
    const count = await syncCatalog(catalog, {
      ...source,
      unmatchedDisabled: (models) =>
        logger.warn({ models }, 'SVC_DISABLED_MODELS names models the upstream does not list'),
    })
    // -1: another replica wrote a list asked for after this one's
    logger.info({ count }, count < 0 ? 'catalog sync superseded by a newer one' : 'catalog synced')
  } catch (error) {
    // Another replica may have synced already; serve what Redis holds and retry on the interval.
    logger.warn({ err: (error as Error).message }, 'catalog sync failed at start; serving the stored catalog')
  }
  const stopSync = startCatalogSync(catalog, source, config.catalogSyncSeconds, {
    store,
    keys,
    logger,
    replica: REPLICA_ID,
  })
  const recordRetentionMs = config.records.recordRetentionDays * 86_400_000
  const { reapIntervalMs, every } = config.market
  const steps = marketSteps(store, keys, undefined, config.market.postWithinMs, reapIntervalMs)
  await publishMinRoutable(store, keys, config.market.minRoutable, logger)
  await armTierSweep(store, keys)
  // Known before the first request; each reaper pass tells it again.
  steps.earlierBuildSeen(await earlierBuildSeen(store, keys))
  const stopReaper = startReaper(store, keys, steps, reapIntervalMs, logger, recordRetentionMs, every)
  // Read only while the store serves: its masters are waited for otherwise, and a loss is the
  // journal's to handle.
  const replication = new ReplicationWatch(
    async () => (store.ready ? store.masters() : []),
    KEEP_UNREPLICATED_MS,
  )
  const kept = new ClearJournal((attempt, req) => steps.clear(attempt, req), logger, {
    replicatedBefore: (master) => replication.replicatedBefore(master),
    masterOf: (key) => store.masterOf(key),
  })
  replication.start(() => kept.held > 0)
  journal = kept
  const unsent = new UnsentClears(
    (attempt, req) => steps.clear(attempt, req),
    logger,
    config.market.journalDir,
    REPLICA_ID.replace(/[^\w.-]/g, '_'),
  )
  unsent.sendKept()

  const webhooks = webhookParts(store, keys, config.masterKey, config.webhooks)
  const stopWebhooks = startWebhookConsumer(
    new WebhookConsumer(store, keys, webhooks.webhooks, webhooks.deliveries, config.webhooks),
    config.webhooks.pollMs,
    logger,
  )

  // Funding's parts (viem's chains, x402) are loaded only by a gateway that takes payments.
  const funding = config.funding
    ? (await import('./funding/start.ts')).startFunding(config, store, keys, logger)
    : undefined
  const payouts = await startPayouts(config, store, keys, logger, funding?.funding.chain)
  const lifecycle = { draining: false }
  const renewer = new LeaseRenewer(steps, config.market.leaseMs, every)
  const app = createApp({
    config,
    store,
    keys,
    steps,
    journal,
    unsent,
    catalog,
    logger,
    funding: funding?.funding,
    payouts: payouts.service,
    lifecycle,
    renewer,
  })
  // Bun's own limit answers a bare 413 (no body, no request id) before the app sees the request,
  // so it is not used: the app refuses a declared length past SVC_MAX_BODY_BYTES before reading a
  // byte (boundBody) and counts a body without one as it reads it (jsonBody, every route's parse:
  // test/reliability/endless-body.test.ts holds each to it); Bun drains a body nobody reads.
  // Elysia's defaults are Bun's development mode (an error that escaped would answer with Bun's
  // page of its stack) unless NODE_ENV=production, and a port shared with any process that asks
  // (a second gateway on a taken port would start and silently take half its traffic).
  const stopWork = async () => {
    stopSync()
    funding?.stop()
    payouts.stop()
    await stopReaper()
    replication.stop()
    await journal?.stop()
    // The pass in flight finishes (its deliveries logged) before Redis goes.
    await stopWebhooks()
  }
  try {
    app.listen({
      port: config.port,
      hostname: config.host,
      idleTimeout: 120,
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      development: false,
      reusePort: false,
    })
  } catch (error) {
    // The port is taken: nothing this start began goes on running.
    await stopWork()
    await forgetReplica(store, keys).catch(() => {})
    store.close()
    // Named by the variables that chose the address: Bun's own message (EINVAL, listen) names neither.
    throw Object.assign(
      new Error(`cannot listen on HOST ${config.host}, PORT ${config.port}: ${(error as Error).message}`),
      { code: (error as { code?: string }).code, cause: error },
    )
  }
  const server = app.server!
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host
  // The attempts still open once their connections are cut end as a client that leaves ends them
  // (a stream cleared on what it generated, a call waiting on its supplier or on its admit
  // released), and the renewer holds each until its clear or release returns, and counts each
  // admit Redis has. Waited on for as long as a stream's clear waits for Redis: past that the clear
  // has given up, and its lease is left to a reaper.
  const settle = async (waitMs: number) => {
    const deadline = Date.now() + waitMs
    if (renewer.inFlight > 0) logger.info({ open: renewer.inFlight }, 'stopping: settling open attempts')
    while (renewer.inFlight > 0 && Date.now() < deadline) await Bun.sleep(20)
    return renewer.inFlight === 0
  }
  const stop = async () => {
    // Connections first: what they cut is cleared while the journal, the reaper and Redis are here.
    await app.stop(true)
    if (!(await settle(config.inference.streamClearWaitMs))) {
      logger.warn({ open: renewer.inFlight }, 'stopping with attempts unsettled; their leases are reaped')
      // Redis that takes commands and never answers (paused, a port that drops packets) would hold
      // every wait below for ever: closed under them, they fail, and a delivered answer's clear
      // still waiting is kept.
      store.close()
      await settle(CLOSED_SETTLE_MS)
    }
    // Redis that takes commands and never answers holds the waits below for ever too (a clear sent
    // again, a reaper pass, a webhook pass, the queued posts): past the settle's wait (or a webhook
    // delivery's, if longer) the store is closed under them, and they fail.
    const bound = Math.max(config.inference.streamClearWaitMs, config.webhooks.timeoutMs)
    const closing = setTimeout(() => {
      logger.warn({ waitedMs: bound }, 'stopping: Redis did not answer; closing the store under the stop')
      store.close()
    }, bound)
    let kept: number
    try {
      // Before Redis goes: a clear the store answers now is not left to a file.
      kept = (await unsent.stop()).kept
      await stopWork()
      // The posts this replica queued go out before Redis does.
      await steps.close()
    } finally {
      clearTimeout(closing)
    }
    store.close()
    // What failed as the store closed is written out by now, or counted lost.
    return { keptClears: kept, lostClears: unsent.lost }
  }
  return {
    url: `http://${host}:${server.port}`,
    port: server.port as number,
    stop,
    replaysSettled: () => kept.settled,
    async drain(graceMs) {
      lifecycle.draining = true
      // No new connections; what is open runs on (streams settle and clear as usual).
      server.stop(false)
      const deadline = Date.now() + graceMs
      while (server.pendingRequests > 0 && Date.now() < deadline) await Bun.sleep(50)
      if (server.pendingRequests > 0)
        logger.warn({ open: server.pendingRequests }, 'grace over; cutting open requests')
      return await stop()
    },
  }
}
