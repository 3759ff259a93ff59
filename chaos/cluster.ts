// The chaos suite's parts, all real: gateway replicas as `serve` processes on one Redis (so a replica
// can be killed -9), the simulated supplier, buyers and offers made through the admin API, and
// `svc-gateway audit` run as the real CLI.
import { randomBytes } from 'node:crypto'
import type { Subprocess } from 'bun'
import { scanHashes } from '../src/market/audit.ts'
import { parseMicros } from '../src/money/units.ts'
import { attemptFields } from '../src/records/attempt-fields.ts'
import { keyspace, type Layout, ownerPrefix } from '../src/redis/keys.ts'
import { freePort } from '../src/redis/local-server.ts'
import type { Store } from '../src/redis/store.ts'
import type { SimServer } from '../src/sim/server.ts'
import { randomWallet } from '../test/helpers/accounts.ts'
import { runCli } from '../test/helpers/cli.ts'
import { startStack, type TestStack } from '../test/helpers/stack.ts'

export const MODEL = 'llama-3.3-70b'

export interface Replica {
  index: number
  url: string
  child: Subprocess
}

/** Where a client sends requests: a replica, or an in-process gateway. */
export type Endpoint = Pick<Replica, 'index' | 'url'>

/** What the buyers' and offers' helpers need of a set of gateways: the operator's token and a URL. */
export interface Gateways {
  adminToken: string
  replicas: Endpoint[]
}

export interface Cluster {
  redisUrl: string
  prefix: string
  adminToken: string
  replicas: Replica[]
  /** Starts (or restarts) replica `index` on a fresh port. */
  start(index: number): Promise<Replica>
  stop(): Promise<void>
}

/** Lease and reaper short, so a dead replica's leases come back within seconds. */
export const CHAOS_ENV: Record<string, string> = {
  SVC_LEASE_SECONDS: '5',
  SVC_REAP_INTERVAL_MS: '250',
  SVC_OFFER_COOLDOWN_MS: '200',
  SVC_STREAM_IDLE_MS: '3000',
  SVC_FIRST_BYTE_TIMEOUT_MS: '3000',
  // A buffered answer has no idle timeout, only this one: a stalled supplier holds it this long.
  SVC_UPSTREAM_TIMEOUT_MS: '5000',
  SVC_SHUTDOWN_GRACE_MS: '1000',
}

async function waitReady(url: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    const ready = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1_000) }).catch(() => null)
    if (ready?.status === 200) return
    await Bun.sleep(100)
  }
  throw new Error(`replica at ${url} not ready after ${ms} ms`)
}

export async function startCluster(options: {
  redisUrl: string
  sim: SimServer
  replicas: number
  env?: Record<string, string>
  /** How a replica is started: the compiled binary (`[path, 'serve']`), else the source. */
  command?: string[]
}): Promise<Cluster> {
  const prefix = `chaos:{${randomBytes(6).toString('hex')}}`
  const adminToken = `chaos-admin-${randomBytes(16).toString('hex')}`
  const masterKey = randomBytes(32).toString('hex')
  const replicas: Replica[] = []
  const start = async (index: number): Promise<Replica> => {
    const port = freePort()
    const child = Bun.spawn(options.command ?? [process.execPath, 'src/main.ts', 'serve'], {
      env: {
        PATH: process.env.PATH ?? '',
        PORT: String(port),
        HOST: '127.0.0.1',
        REDIS_URL: options.redisUrl,
        SVC_REDIS_PREFIX: prefix,
        SVC_ADMIN_TOKEN: adminToken,
        SVC_MASTER_KEY: masterKey,
        SVC_UPSTREAM_URL: options.sim.url,
        LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'silent',
        ...CHAOS_ENV,
        ...options.env,
      },
      // CHAOS_LOG_LEVEL=warn shows a replica's log lines (its pino JSON on stdout) while debugging.
      stdout: process.env.CHAOS_LOG_LEVEL ? 'inherit' : 'ignore',
      stderr: 'inherit',
    })
    const replica = { index, url: `http://127.0.0.1:${port}`, child }
    replicas[index] = replica
    await waitReady(replica.url, 20_000)
    return replica
  }
  await Promise.all(Array.from({ length: options.replicas }, (_, i) => start(i)))
  return {
    redisUrl: options.redisUrl,
    prefix,
    adminToken,
    replicas,
    start,
    async stop() {
      for (const replica of replicas) replica.child.kill('SIGKILL')
      await Promise.all(replicas.map((r) => r.child.exited))
    },
  }
}

/**
 * One gateway in process on `redisUrl` with its market held apart (layout 'apart', which `serve`
 * does not read from the environment), on its own simulated supplier, with the chaos lease times.
 */
export async function apartGateway(redisUrl: string): Promise<{ stack: TestStack; gateways: Gateways }> {
  const stack = await startStack({
    sim: { tokensPerSecond: 100, outputTokens: 30 },
    env: { REDIS_URL: redisUrl, ...CHAOS_ENV },
    tune: (config) => {
      config.redisLayout = 'apart'
    },
  })
  return {
    stack,
    gateways: { adminToken: stack.config.adminToken, replicas: [{ index: 0, url: stack.url }] },
  }
}

export function call(url: string, path: string, token: string, body?: unknown, method = 'POST') {
  return fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  })
}

export interface Buyer {
  accountId: string
  apiKey: string
  keyId: string
}

export async function fundedBuyer(cluster: Gateways, usdc = '10.000000'): Promise<Buyer> {
  const url = cluster.replicas[0]!.url
  const created = await call(url, '/admin/v1/accounts', cluster.adminToken, { wallet: randomWallet() })
  if (created.status !== 201) throw new Error(`account: ${created.status} ${await created.text()}`)
  const account = (await created.json()) as { accountId: string; apiKey: string }
  const credit = await call(url, `/admin/v1/accounts/${account.accountId}/credit`, cluster.adminToken, {
    amountUsdc: usdc,
  })
  if (credit.status !== 200) throw new Error(`credit: ${credit.status}`)
  const keys = (await (await call(url, '/v1/agent/keys', account.apiKey, undefined, 'GET')).json()) as {
    activeApiKeys: { id: string }[]
  }
  return { ...account, keyId: keys.activeApiKeys[0]!.id }
}

/** An offer on the simulated supplier under its own upstream key (the key faults are set on). */
export async function simOffer(
  cluster: Gateways,
  sim: SimServer,
  askCents: number,
  maxInFlight = 64,
): Promise<string> {
  const upstreamKey = `chaos-${randomBytes(8).toString('hex')}`
  const response = await call(cluster.replicas[0]!.url, '/admin/v1/offers', cluster.adminToken, {
    upstreamBaseUrl: sim.url,
    upstreamApiKey: upstreamKey,
    askCents,
    capacityDiem: '500',
    maxInFlight,
  })
  if (response.status !== 201) throw new Error(`offer: ${response.status} ${await response.text()}`)
  return upstreamKey
}

export async function setFault(sim: SimServer, key: string, fault: string | null, times = 1) {
  await fetch(`${sim.url}/sim/keys/${encodeURIComponent(key)}`, {
    method: 'PUT',
    body: JSON.stringify({ fault, times }),
  })
}

/** What one request came to, as its client saw it. */
export interface Outcome {
  replica: number
  stream: boolean
  status: number
  requestId: string | null
  /** micro-USDC the client was told it was charged (cost header or svc.cost frame); null: none. */
  ackedCost: number | null
  /** The error code of a refusal or an SSE error frame. */
  error: string | null
  /** The connection died or timed out (the error's name). */
  transport: string | null
  startedAt: number
  endedAt: number
}

/** The contract's error shape's code, or "not-error-shape" (a test failure waiting to be seen). */
export function errorCode(text: string): string {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code
    return typeof code === 'string' ? code : 'not-error-shape'
  } catch {
    return 'not-error-shape'
  }
}

/** One chat request, buffered or streamed, read to its end. */
export async function chat(
  replica: Endpoint,
  apiKey: string,
  stream: boolean,
  /** Called when a stream's head has come: its attempt is admitted and stays open until its end. */
  onStreaming?: () => void,
): Promise<Outcome> {
  const outcome: Outcome = {
    replica: replica.index,
    stream,
    status: 0,
    requestId: null,
    ackedCost: null,
    error: null,
    transport: null,
    startedAt: Date.now(),
    endedAt: 0,
  }
  try {
    const response = await call(replica.url, '/v1/chat/completions', apiKey, {
      model: MODEL,
      stream,
      max_tokens: 64,
      messages: [{ role: 'user', content: 'chaos' }],
    })
    outcome.status = response.status
    outcome.requestId = response.headers.get('x-svc-request-id')
    if (stream && response.status === 200) onStreaming?.()
    const text = await response.text()
    if (!stream || response.status !== 200) {
      const cost = response.headers.get('x-svc-cost-usdc')
      if (cost !== null) outcome.ackedCost = parseMicros(cost)
      if (response.status !== 200) outcome.error = errorCode(text)
    } else {
      for (const frame of text.split('\n\n')) {
        const data = frame.split('\n').find((line) => line.startsWith('data: '))
        if (!data || data === 'data: [DONE]') continue
        const parsed = JSON.parse(data.slice(6)) as { object?: string; costUsdc?: string; error?: unknown }
        if (parsed.object === 'svc.cost') outcome.ackedCost = parseMicros(parsed.costUsdc!)
        if (parsed.error) outcome.error = errorCode(data.slice(6))
      }
    }
  } catch (error) {
    outcome.transport = (error as Error).name
  }
  outcome.endedAt = Date.now()
  return outcome
}

/** `svc-gateway audit`, the real CLI, on the cluster's keyspace: its exit code and what it printed. */
export async function runAudit(redisUrl: string, prefix: string): Promise<{ code: number; output: string }> {
  const { code, stdout, stderr } = await runCli(['audit'], { REDIS_URL: redisUrl, SVC_REDIS_PREFIX: prefix })
  return { code, output: stdout + stderr }
}

/**
 * Every attempt hash of the keyspace (the record of each admitted request), on every master of a
 * Cluster; held apart, under every account shard's tag.
 */
export async function attempts(store: Store, prefix: string, layout: Layout = 'one-slot') {
  const base = layout === 'apart' ? `${ownerPrefix(prefix, 'a.*')}:` : keyspace(prefix).base
  const rows = await scanHashes(store, `${base.replace(/[{}]/g, (c) => `\\${c}`)}attempt:*`)
  return rows.map((row) => attemptFields(row))
}

/** Waits until no lease is open and no in-flight count is left (reaped or settled), or throws. */
export async function settled(store: Store, prefix: string, ms: number): Promise<number> {
  const started = Date.now()
  while (Date.now() - started < ms) {
    const keys = keyspace(prefix)
    const leases = await store.zcard(keys.leases)
    const accounts = await store.smembers(keys.accounts)
    const counts = await Promise.all(accounts.map((id) => store.hget(keys.account(id), 'inflight')))
    const inflight = counts.reduce((sum, count) => sum + Number(count ?? 0), 0)
    if (leases === 0 && inflight === 0) return Date.now() - started
    await Bun.sleep(100)
  }
  throw new Error(`leases or in-flight counts still open after ${ms} ms`)
}

/**
 * Steady load: `workers` clients each sending one request after another (streamed with probability
 * `streamShare`) to a random live replica as a random buyer, until `stop()`; every outcome is kept.
 */
export function steadyLoad(options: {
  replicas: () => Endpoint[]
  buyers: Buyer[]
  workers: number
  streamShare: number
}) {
  const outcomes: Outcome[] = []
  const open = new Map<number, number>()
  const streaming = new Map<number, number>()
  const add = (counts: Map<number, number>, index: number, by: number) =>
    counts.set(index, (counts.get(index) ?? 0) + by)
  let running = true
  const pick = <T>(list: T[]) => list[Math.floor(Math.random() * list.length)]!
  const worker = async () => {
    while (running) {
      const replica = pick(options.replicas())
      add(open, replica.index, 1)
      let headed = false
      const outcome = await chat(
        replica,
        pick(options.buyers).apiKey,
        Math.random() < options.streamShare,
        () => {
          headed = true
          add(streaming, replica.index, 1)
        },
      )
      outcomes.push(outcome)
      add(open, replica.index, -1)
      if (headed) add(streaming, replica.index, -1)
      // A client told to retry later does not spin.
      if (outcome.status === 503 || outcome.status === 429) await Bun.sleep(100)
    }
  }
  const done = Promise.all(Array.from({ length: options.workers }, worker))
  return {
    outcomes,
    /** Requests open on a replica right now. */
    openOn: (index: number) => open.get(index) ?? 0,
    /** Streams on a replica whose head has come and whose end has not: admitted, not yet cleared. */
    streamingOn: (index: number) => streaming.get(index) ?? 0,
    /** Requests open on every replica together. */
    openNow: () => [...open.values()].reduce((a, b) => a + b, 0),
    async stop() {
      running = false
      await done
      return outcomes
    },
  }
}

/** Random supplier faults on the given upstream keys, one every `everyMs`, until `stop()`. */
export function randomFaults(sim: SimServer, upstreamKeys: string[], everyMs: number) {
  const faults = ['error_5xx', 'rate_limit', 'truncate', 'stall', null] as const
  let injected = 0
  const timer = setInterval(() => {
    const key = upstreamKeys[Math.floor(Math.random() * upstreamKeys.length)]!
    const fault = faults[Math.floor(Math.random() * faults.length)]!
    if (fault) injected++
    void setFault(sim, key, fault, 1 + Math.floor(Math.random() * 2))
  }, everyMs)
  return {
    stop() {
      clearInterval(timer)
      return injected
    },
  }
}

/**
 * The money check against what the clients saw: for every request a client saw end (any replica
 * still alive), what Redis charged for it equals what the client was told (0 when told nothing).
 * `mayBeUnheard`: the requests a kill may have cut between the clear and the cost reaching the
 * client. Returns the cleared attempts no client heard of, and every attempt's state count.
 */
export async function reconcile(
  store: Store,
  prefix: string,
  outcomes: Outcome[],
  mayBeUnheard: (o: Outcome) => boolean,
  layout: Layout = 'one-slot',
) {
  const rows = await attempts(store, prefix, layout)
  const chargedByRequest = new Map<string, number>()
  const states: Record<string, number> = {}
  for (const a of rows) {
    states[a.state!] = (states[a.state!] ?? 0) + 1
    if (a.state === 'cleared') {
      chargedByRequest.set(a.requestId!, (chargedByRequest.get(a.requestId!) ?? 0) + Number(a.costUsdc))
    }
  }
  const mismatches: string[] = []
  const acked = new Set<string>()
  for (const o of outcomes) {
    if (o.requestId && o.ackedCost !== null) acked.add(o.requestId)
    if (mayBeUnheard(o) && o.ackedCost === null) continue
    const charged = o.requestId ? (chargedByRequest.get(o.requestId) ?? 0) : 0
    if (charged !== (o.ackedCost ?? 0)) {
      mismatches.push(`${o.requestId} (${o.status} ${o.error}): told ${o.ackedCost}, charged ${charged}`)
    }
  }
  const unheard = [...chargedByRequest].filter(([id, charged]) => charged > 0 && !acked.has(id))
  const accountsSpent = await spentOf(store, prefix, layout)
  const totalCharged = [...chargedByRequest.values()].reduce((a, b) => a + b, 0)
  return { states, mismatches, unheard, accountsSpent, totalCharged }
}

/** The sum of every account's spent (micro-USDC). */
export async function spentOf(store: Store, prefix: string, layout: Layout = 'one-slot'): Promise<number> {
  const keys = keyspace(prefix, layout)
  let spent = 0
  for (const id of await store.smembers(keys.accounts))
    spent += Number(await store.hget(keys.account(id), 'spent'))
  return spent
}
