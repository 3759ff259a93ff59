// Real parts over real sockets: the simulated supplier and a gateway on free ports, on the shared
// test redis-server, each stack under its own key prefix so tests never see each other's keys.
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import type { Logger } from 'pino'
import { type GatewayConfig, loadGatewayConfig } from '../../src/config.ts'
import { type RunningGateway, startGateway } from '../../src/gateway.ts'
import { createLogger } from '../../src/logger.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import type { Store } from '../../src/redis/store.ts'
import { createStore } from '../../src/redis/store.ts'
import { type SimServer, type SimSettings, startSim } from '../../src/sim/server.ts'

/** A port free now, for a server that must know its port before it listens. */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

export function testRedisUrl(): string {
  const url = process.env.TEST_REDIS_URL
  if (!url) throw new Error('test/preload.ts did not start redis')
  return url
}

/** A prefix with a fresh hash tag: the whole keyspace of one test stack. */
export function testPrefix(): string {
  return `test:{${randomBytes(6).toString('hex')}}`
}

export interface TestStack {
  gateway: RunningGateway
  sim: SimServer
  redis: Store
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
  } = {},
): Promise<TestStack> {
  const sim = startSim({ port: 0, ...options.sim })
  const prefix = testPrefix()
  const config = loadGatewayConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    REDIS_URL: testRedisUrl(),
    SVC_REDIS_PREFIX: prefix,
    SVC_ADMIN_TOKEN: `test-admin-${randomBytes(16).toString('hex')}`,
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_UPSTREAM_URL: sim.url,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...options.env,
  })
  options.tune?.(config)
  const gateway = await startGateway(config, options.logger ?? createLogger(config.logLevel))
  const redis = createStore(testRedisUrl(), { name: 'svc-test' })
  return {
    gateway,
    sim,
    redis,
    keys: keyspace(prefix),
    config,
    url: gateway.url,
    async stop() {
      await gateway.stop()
      await sim.stop()
      redis.close()
    },
  }
}

/**
 * Every key of a prefix with its value dump, to prove a request changed nothing in Redis. A stream
 * is compared by its entries (a consumer group's bookkeeping is not a change), a hash by its fields;
 * the replicas' heartbeat (stamped by every reaper pass) is left out.
 */
export async function snapshotKeys(redis: Store, prefix: string): Promise<Record<string, string>> {
  const keys = (await redis.keys(`${prefix.replace(/[{}]/g, (c) => `\\${c}`)}:*`)).sort()
  // Each replica's reaper stamps these on its own clock, whatever the requests do.
  const heartbeat = new Set([`${prefix}:replicas`, `${prefix}:reaper`])
  const snapshot: Record<string, string> = {}
  for (const key of keys) {
    if (heartbeat.has(key)) continue
    const type = await redis.type(key)
    if (type === 'stream') {
      snapshot[key] = JSON.stringify(await redis.xrange(key, '-', '+'))
      continue
    }
    // By content: a large hash's DUMP order moves when a read rehashes it, though nothing changed.
    if (type === 'hash') {
      snapshot[key] = JSON.stringify(
        Object.entries(await redis.hgetall(key)).sort(([a], [b]) => a.localeCompare(b)),
      )
      continue
    }
    const dump = await redis.dumpBuffer(key)
    snapshot[key] = dump ? dump.toString('hex') : ''
  }
  return snapshot
}
