// Real parts over real sockets: the simulated supplier and a gateway on free ports, on the shared
// test redis-server, each stack under its own key prefix so tests never see each other's keys.

import { afterAll } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import type { Logger } from 'pino'
import { type GatewayConfig, loadGatewayConfig } from '../../src/config.ts'
import { type RunningGateway, startGateway } from '../../src/gateway.ts'
import { createLogger } from '../../src/logger.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { startLocalCluster } from '../../src/redis/local-cluster.ts'
import { startLocalRedis } from '../../src/redis/local-server.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore } from '../../src/redis/store.ts'
import { parseRedisTarget } from '../../src/redis/target.ts'
import { type SimServer, type SimSettings, startSim } from '../../src/sim/server.ts'
import { testRedisUrl, useOwnRedis } from './test-redis.ts'

/** A port free now, for a server that must know its port before it listens. */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

export { testRedisUrl }

/**
 * A URL in front of the run's Redis (a proxy's) naming the run's database, as the test's own store
 * does: a parallel run gives each worker a database of its own on one server (a Cluster has only
 * database 0).
 */
export function onTestDatabase(url: string): string {
  return onCluster() ? url : `${url}${new URL(testRedisUrl()).pathname}`
}

/** Whether the run's Redis is a Cluster (TEST_REDIS_TOPOLOGY=cluster, or a cluster REDIS_URL). */
export function onCluster(): boolean {
  return parseRedisTarget(testRedisUrl()).kind === 'cluster'
}

/**
 * A redis-server for this file alone, from here on its test store: for a file that reads or changes
 * what the whole server holds (its client list, its functions, its command counts), which other
 * files sharing the run's server would blur. Call it at the top of the file. `like: 'run'`: a
 * Cluster of its own instead when the run's is one, for a file that only needs the keyspace to
 * itself (one it empties), not one server.
 */
export async function ownRedis(options: { like?: 'run' } = {}): Promise<{ url: string }> {
  const redis = options.like === 'run' && onCluster() ? await startLocalCluster(3) : await startLocalRedis()
  // Files run one after another in one process get the run's server back once this file ends.
  afterAll(useOwnRedis(redis))
  return redis
}

/** A prefix with a fresh hash tag: the whole keyspace of one test stack. */
export function testPrefix(): string {
  return `test:{${randomBytes(6).toString('hex')}}`
}

export interface TestStack {
  gateway: RunningGateway
  sim: SimServer
  store: Store
  keys: Keyspace
  config: GatewayConfig
  url: string
  stop(): Promise<void>
}

export async function startStack(
  options: {
    sim?: Partial<SimSettings>
    env?: Record<string, string>
    logger?: Logger
    /**
     * Changes the loaded config before the gateway starts: how a test sets a time (a lease of
     * milliseconds) that the environment's validation would refuse, instead of sleeping through one.
     */
    tune?: (config: GatewayConfig) => void
    /** The key prefix, for a test that must know it first (to find the server that holds it). */
    prefix?: string
  } = {},
): Promise<TestStack> {
  const sim = startSim({ port: 0, ...options.sim })
  const prefix = options.prefix ?? testPrefix()
  const config = loadGatewayConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    REDIS_URL: testRedisUrl(),
    SVC_REDIS_PREFIX: prefix,
    SVC_ADMIN_TOKEN: `test-admin-${randomBytes(16).toString('hex')}`,
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_UPSTREAM_URL: sim.url,
    // The key the catalog sync asks the video quotes with: without one no video model is live.
    SVC_UPSTREAM_API_KEY: 'test-catalog-key',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...options.env,
  })
  options.tune?.(config)
  const gateway = await startGateway(config, options.logger ?? createLogger(config.logLevel))
  const store = createStore(testRedisUrl(), { name: 'svc-test' })
  return {
    gateway,
    sim,
    store,
    keys: keyspace(prefix),
    config,
    url: gateway.url,
    async stop() {
      await gateway.stop()
      await sim.stop()
      store.close()
    },
  }
}

/**
 * A snapshot without the API keys' records: a key's lastUsedAt may be written once a minute by any
 * request, refused or not; the money and market keys must not move.
 */
export function moneyAndMarketKeys(snapshot: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(snapshot).filter(([key]) => !key.includes(':apikey:')))
}

/**
 * Every key of a prefix with its value dump, to prove a request changed nothing in Redis. A stream
 * is compared by its entries (a consumer group's bookkeeping is not a change), a hash by its fields;
 * the replicas' heartbeat (stamped by every reaper pass), the reaping claim and the catalog sync's
 * claim are left out.
 */
export async function snapshotKeys(store: Store, prefix: string): Promise<Record<string, string>> {
  // Each replica's reaper stamps these on its own clock, whatever the requests do.
  const heartbeat = new Set([
    `${prefix}:replicas`,
    `${prefix}:replicas:marking`,
    `${prefix}:replicas:tiering`,
    `${prefix}:reaper`,
    `${prefix}:reaper:claim`,
    `${prefix}:catalog:sync-claim`,
  ])
  // Upstream key checks are counted before the upstream is asked, whatever it answers: a supplier's
  // count and the market's are the fuses, and move under a refusal by design (src/suppliers/offers.ts).
  const counted = (key: string) =>
    (key.startsWith(`${prefix}:supplier:`) && key.includes(':key-checks:')) ||
    key.startsWith(`${prefix}:key-checks:`)
  const keys = (await keysUnder(store, `${prefix}:`))
    .filter((key) => !heartbeat.has(key) && !counted(key))
    .sort()
  // Each step's commands sent together: two round trips, not two a key (fuzz tests take thousands).
  const types = await Promise.all(keys.map((key) => store.type(key)))
  const values = await Promise.all(
    keys.map(async (key, i) => {
      if (types[i] === 'stream') return JSON.stringify(await store.xrange(key, '-', '+'))
      // By content: a large hash's DUMP order moves when a read rehashes it, though nothing changed.
      if (types[i] === 'hash') {
        const fields = Object.entries(await store.hgetall(key))
        // A key's last use is stamped by whichever request uses it, refused or not, at most once a
        // minute: a test file running past a minute would see it move under a refusal.
        const stamped = key.startsWith(`${prefix}:apikey:`) || key.startsWith(`${prefix}:supkey:`)
        // The reaper's sweep of the capacity tiers marks its progress on the market hash each pass.
        const swept = key === `${prefix}:market`
        return JSON.stringify(
          fields
            .filter(([field]) => !stamped || field !== 'lastUsedAt')
            .filter(([field]) => !swept || (field !== 'tiered' && field !== 'tierSwept'))
            .sort(([a], [b]) => a.localeCompare(b)),
        )
      }
      const dump = await store.dumpBuffer(key)
      return dump ? dump.toString('hex') : ''
    }),
  )
  return Object.fromEntries(keys.map((key, i) => [key, values[i]!]))
}

/** Whether each store's Redis is a Cluster, asked once. */
const clustered = new WeakMap<Store, Promise<boolean>>()

/** More keys than one test's prefix ever holds. */
const SLOT_KEYS = 10_000_000

/**
 * Every key that starts with `start` and matches the glob `rest` (`*` and `?`) after it, from every
 * master (a Cluster's keyless KEYS asks one at random). On a Cluster a `start` with a hash tag has
 * its keys in one slot: that slot's keys are read, not every file's keys on every master, as a
 * single server's KEYS reads the file's own database only.
 */
export async function keysUnder(store: Store, start: string, rest = '*'): Promise<string[]> {
  const masters = await store.masters()
  if (!hashTagged(start) || !(await isCluster(store))) {
    const pattern = `${start.replace(/[{}*?[\]\\]/g, (c) => `\\${c}`)}${rest}`
    return (await Promise.all(masters.map((node) => node.keys(pattern)))).flat()
  }
  const slot = Number(await store.call('CLUSTER', 'KEYSLOT', start))
  const inSlot = await Promise.all(
    masters.map((node) => node.call('CLUSTER', 'GETKEYSINSLOT', slot, SLOT_KEYS)),
  )
  const glob = rest.replace(/[.+^${}()|[\]\\*?]/g, (c) => (c === '*' ? '.*' : c === '?' ? '.' : `\\${c}`))
  const after = new RegExp(`^${glob}$`, 's')
  return (inSlot.flat() as string[]).filter(
    (key) => key.startsWith(start) && after.test(key.slice(start.length)),
  )
}

/** Whether `key`'s slot comes from a hash tag it holds whole: a non-empty `{...}`, the first `{`. */
function hashTagged(key: string): boolean {
  const open = key.indexOf('{')
  return open >= 0 && key.indexOf('}', open) > open + 1
}

function isCluster(store: Store): Promise<boolean> {
  let answer = clustered.get(store)
  if (!answer) {
    answer = store.info('cluster').then((info) => info.includes('cluster_enabled:1'))
    clustered.set(store, answer)
  }
  return answer
}

/** Empties every master of the store's Redis (a Cluster's keyless FLUSHDB would empty one). */
export async function flushAll(store: Store): Promise<void> {
  await Promise.all((await store.masters()).map((node) => node.flushdb()))
}
