// What the benchmark runs on loopback: a real redis-server, simulated suppliers, the compiled
// gateway and the peer gateway, each its own process; then an offer and a funded account made
// through the operator API, as an operator would.
import { createHash, randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { RedisClient } from 'bun'
import { freePort, type LocalRedis, startLocalRedis } from '../src/redis/local-server.ts'
import { randomWallet } from '../test/helpers/accounts.ts'
import { type Service, spawnService, stopAll, waitForHttp } from './procs.ts'

export const ROOT = resolve(import.meta.dir, '..')
export const GATEWAY_BINARY = join(ROOT, 'dist/svc-gateway')
export const PEER_ENTRY = join(ROOT, 'bench/node_modules/@portkey-ai/gateway/build/start-server.js')

/** Bun's fetch allows 256 requests at once unless told otherwise; open streams need thousands. */
const FETCH_LIMIT = { BUN_CONFIG_MAX_HTTP_REQUESTS: '8192' }

export type TargetName = 'direct' | 'floor' | 'peer' | 'gateway'
/**
 * How the gateway reaches the bench's Redis: its Unix socket, as `svc-gateway demo` does with the
 * Redis it starts (one machine), or loopback TCP, as a Redis elsewhere would be reached.
 */
export type RedisTransport = 'unix' | 'tcp'
export const TARGETS: readonly TargetName[] = ['direct', 'peer', 'gateway']
/** With the floor (bench/floor-gateway.ts) beside them, where latency and CPU are compared. */
export const WITH_FLOOR: readonly TargetName[] = ['direct', 'floor', 'peer', 'gateway']

/** One way to send the same chat request: its full URL and the headers it needs. */
export interface Target {
  name: TargetName
  url: string
  headers: Record<string, string>
  /** The process that serves it, whose memory is measured. */
  pid: number
}

export interface Sim {
  url: string
  service: Service
}

export interface BenchGateway {
  url: string
  service: Service
  adminToken: string
}

export interface Buyer {
  accountId: string
  apiKey: string
}

export class BenchStack {
  readonly logDir = mkdtempSync(join(tmpdir(), 'svc-bench-'))
  redis!: LocalRedis

  async startRedis(): Promise<LocalRedis> {
    this.redis = await startLocalRedis()
    return this.redis
  }

  async startSim(name: string, env: Record<string, string> = {}): Promise<Sim> {
    const port = freePort()
    const service = spawnService(name, [GATEWAY_BINARY, 'sim'], {
      logDir: this.logDir,
      env: { SIM_PORT: String(port), SIM_HOST: '127.0.0.1', SIM_BALANCE_DIEM: '1000000', ...env },
    })
    const url = `http://127.0.0.1:${port}`
    await waitForHttp(service, `${url}/models`)
    return { url, service }
  }

  /** The compiled gateway, under its own key prefix, its catalog synced from `upstreamUrl`. */
  async startGateway(
    name: string,
    upstreamUrl: string,
    command: string[] = [GATEWAY_BINARY, 'serve'],
    redisOver: RedisTransport = 'unix',
    env: Record<string, string> = {},
  ): Promise<BenchGateway> {
    const port = freePort()
    const adminToken = `bench-admin-${randomBytes(16).toString('hex')}`
    const service = spawnService(name, command, {
      cwd: ROOT,
      logDir: this.logDir,
      env: {
        ...FETCH_LIMIT,
        PORT: String(port),
        HOST: '127.0.0.1',
        REDIS_URL: redisOver === 'unix' ? this.redis.socketUrl : this.redis.url,
        SVC_REDIS_PREFIX: `bench:{${name}}`,
        SVC_ADMIN_TOKEN: adminToken,
        SVC_MASTER_KEY: randomBytes(32).toString('hex'),
        SVC_UPSTREAM_URL: upstreamUrl,
        LOG_LEVEL: 'warn',
        // The load comes from one buyer key: its caps must not be what is measured.
        SVC_KEY_MAX_IN_FLIGHT: '100000',
        SVC_WALLET_MAX_IN_FLIGHT: '100000',
        // Fall-forward is measured on every request: a failed offer must not sit out.
        SVC_OFFER_COOLDOWN_MS: '0',
        ...env,
      },
    })
    const url = `http://127.0.0.1:${port}`
    await waitForHttp(service, `${url}/readyz`)
    return { url, service, adminToken }
  }

  /**
   * The floor (bench/floor-gateway.ts) under Bun, on the bench's Redis over its Unix socket as the
   * gateway reaches it, with one account for `apiKey` and one offer, funded far beyond the run.
   */
  async startFloor(
    name: string,
    upstreamUrl: string,
    apiKey: string,
  ): Promise<{ url: string; service: Service }> {
    const base = `bench:{${name}}:`
    const redis = new RedisClient(this.redis.url)
    await redis.send('HSET', [
      `${base}floor:acct:${floorAccount(apiKey)}`,
      'confirmed',
      '1000000000000000',
      'held',
      '0',
    ])
    await redis.send('HSET', [
      `${base}floor:offer:o`,
      'posted',
      '1000000000000000',
      'held',
      '0',
      'burned',
      '0',
      'earned',
      '0',
    ])
    await redis.send('ZADD', [`${base}floor:ladder`, '50', 'o'])
    redis.close()
    const port = freePort()
    const service = spawnService(name, [process.execPath, join(ROOT, 'bench/floor-gateway.ts')], {
      logDir: this.logDir,
      env: {
        ...FETCH_LIMIT,
        PORT: String(port),
        UPSTREAM_URL: upstreamUrl,
        REDIS_URL: this.redis.socketUrl,
        FLOOR_BASE: base,
      },
    })
    const url = `http://127.0.0.1:${port}`
    await waitForHttp(service, url)
    return { url, service }
  }

  /** The peer: Portkey's gateway from bench/node_modules, run under Bun. */
  async startPeer(name: string): Promise<{ url: string; service: Service }> {
    const port = freePort()
    const service = spawnService(name, [process.execPath, PEER_ENTRY, `--port=${port}`, '--headless'], {
      logDir: this.logDir,
      cwd: join(ROOT, 'bench'),
      env: { ...FETCH_LIMIT, NODE_ENV: 'production' },
    })
    const url = `http://127.0.0.1:${port}`
    await waitForHttp(service, url)
    return { url, service }
  }

  stop(): Promise<void> {
    return stopAll().then(() => this.redis?.stop())
  }
}

async function admin(gateway: BenchGateway, path: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`${gateway.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gateway.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`)
  return (await response.json()) as Record<string, unknown>
}

/** A funded buyer through the operator API: account, then a credit. */
export async function fundedBuyer(gateway: BenchGateway, usdc = '100000.000000'): Promise<Buyer> {
  const account = await admin(gateway, '/admin/v1/accounts', { wallet: randomWallet() })
  const accountId = String(account.accountId)
  await admin(gateway, `/admin/v1/accounts/${accountId}/credit`, { amountUsdc: usdc, note: 'benchmark' })
  return { accountId, apiKey: String(account.apiKey) }
}

/** An offer on a simulated supplier under `upstreamKey`, roomy enough that only speed is measured. */
export async function postOffer(gateway: BenchGateway, sim: Sim, upstreamKey: string, askCents: number) {
  return admin(gateway, '/admin/v1/offers', {
    upstreamBaseUrl: sim.url,
    upstreamApiKey: upstreamKey,
    askCents,
    capacityDiem: '1000000',
    maxInFlight: 100_000,
  })
}

/** Sets a fault on one upstream key of a simulated supplier (its control API). */
export async function simFault(sim: Sim, key: string, fault: string | null): Promise<void> {
  const response = await fetch(`${sim.url}/sim/keys/${encodeURIComponent(key)}`, {
    method: 'PUT',
    body: JSON.stringify({ fault }),
  })
  if (!response.ok) throw new Error(`sim fault: ${response.status}`)
}

const CHAT_PATH = '/v1/chat/completions'

/** The floor's account for a key: the key's digest, as bench/floor-gateway.ts looks it up. */
const floorAccount = (apiKey: string) => createHash('sha256').update(apiKey).digest('hex')

/** The three ways to send one chat request: to the supplier, through the peer, through the gateway. */
export function targets(
  sim: Sim,
  upstreamKey: string,
  peer: { url: string; service: Service },
  gateway: BenchGateway,
  buyer: Buyer,
  floor?: { url: string; service: Service },
): Record<TargetName, Target> {
  const json = { 'content-type': 'application/json' }
  return {
    direct: {
      name: 'direct',
      url: `${sim.url}/chat/completions`,
      headers: { ...json, authorization: `Bearer ${upstreamKey}` },
      pid: sim.service.pid,
    },
    // Without a floor started, a target no scenario lists.
    floor: {
      name: 'floor',
      url: `${floor?.url ?? sim.url}${CHAT_PATH}`,
      headers: { ...json, authorization: `Bearer ${buyer.apiKey}` },
      pid: floor?.service.pid ?? 0,
    },
    peer: {
      name: 'peer',
      url: `${peer.url}${CHAT_PATH}`,
      headers: {
        ...json,
        authorization: `Bearer ${upstreamKey}`,
        'x-portkey-provider': 'openai',
        'x-portkey-custom-host': sim.url,
      },
      pid: peer.service.pid,
    },
    gateway: {
      name: 'gateway',
      url: `${gateway.url}${CHAT_PATH}`,
      headers: { ...json, authorization: `Bearer ${buyer.apiKey}` },
      pid: gateway.service.pid,
    },
  }
}
