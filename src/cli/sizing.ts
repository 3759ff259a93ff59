// `svc-gateway sizing`: what this machine's Redis carries, to size a deployment. For each number of
// Redis masters (a single redis-server, or a local Cluster) and each number of gateway replicas, it
// starts them and the simulated supplier as processes of this binary, drives buffered paid chat
// through every replica at once, and prints a table: paid requests/s, Redis CPU per paid request,
// and the busiest master's share of the Redis CPU (where one master does all the work, adding
// masters adds nothing). Needs redis-server and redis-cli on PATH; touches nothing it did not start.
// With --io-threads N each Redis reads and writes its sockets on N threads (redis.conf's io-threads,
// with io-threads-do-reads), leaving its main thread the commands and scripts alone. With --pin N
// (Linux) the masters run on N physical cores of their own, one master to a core, and everything
// else on the other cores: Redis as a deployment runs it, with a core that nothing else shares.
// With --max-in-flight N each offer takes at most N requests at once: a market whose caps bind,
// where the requests beyond them wait and ask again.
//   svc-gateway sizing [--masters 1,3] [--replicas 1,2,4,8] [--clients 32] [--seconds 5] [--io-threads 1]
//                      [--layout one-slot|apart] [--offers 1] [--max-in-flight N] [--accounts <clients>] [--pin 3]
import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import { AccountStore } from '../accounts/accounts.ts'
import { loadGatewayConfig } from '../config.ts'
import { OfferService } from '../market/offers.ts'
import type { MicroDiem } from '../money/units.ts'
import { keyspace } from '../redis/keys.ts'
import { claimLayout } from '../redis/layout.ts'
import { startLocalCluster } from '../redis/local-cluster.ts'
import { freePort, startLocalRedis } from '../redis/local-server.ts'
import { serverCpu, serverPids } from '../redis/server-cpu.ts'
import { createStore } from '../redis/store.ts'
import { cpusOf, type PinPlan, pinPlan, pinProcess } from './cpu-pinning.ts'
import { type SizingOptions, sizingOptions } from './sizing-options.ts'

export interface SizingRow {
  masters: number
  replicas: number
  requestsPerSecond: number
  failed: number
  /** Redis CPU (user + system, every master) per paid request, µs. */
  redisUsPerRequest: number
  /** The part of it on the masters' main threads (what I/O threads cannot take over), µs. */
  mainThreadUsPerRequest: number
  /** The busiest master's part of the Redis CPU, 0..1. */
  busiestShare: number
}

const MODEL = 'llama-3.3-70b'
const BODY = JSON.stringify({
  model: MODEL,
  messages: [{ role: 'user', content: 'Size the deployment.' }],
  max_tokens: 16,
})
const WARM_SECONDS = 1

/** Funded accounts per replica: one per client unless told. */
function accountsOf(options: SizingOptions): number {
  return options.accounts ?? options.clients
}

/** This binary (or, from source, Bun and the entry) with `args`. */
function self(args: string[]): string[] {
  const entry = join(import.meta.dir, '../main.ts')
  return existsSync(entry) ? [process.execPath, entry, ...args] : [process.execPath, ...args]
}

/**
 * `sizing load <url> <apiKeys> <clients> <seconds>`: one replica's load, client i on key i of the
 * comma-separated keys (round robin); prints {ok, failed}.
 */
async function load([url, apiKeys, clients, seconds]: string[]): Promise<void> {
  const keys = apiKeys!.split(',')
  const end = performance.now() + Number(seconds) * 1000
  let ok = 0
  let failed = 0
  const client = async (_: unknown, i: number) => {
    const headers = { authorization: `Bearer ${keys[i % keys.length]}`, 'content-type': 'application/json' }
    while (performance.now() < end) {
      try {
        const response = await fetch(url!, { method: 'POST', headers, body: BODY })
        await response.arrayBuffer()
        if (response.status === 200) ok++
        else failed++
      } catch {
        failed++
      }
    }
  }
  await Promise.all(Array.from({ length: Number(clients) }, client))
  console.log(JSON.stringify({ ok, failed }))
}

async function waitForHttp(proc: Subprocess, url: string): Promise<void> {
  const deadline = Date.now() + 30_000
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${url}: the process exited (${proc.exitCode})`)
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return
    if (Date.now() > deadline) throw new Error(`${url} did not answer`)
    await Bun.sleep(50)
  }
}

async function stopAll(procs: Subprocess[]): Promise<void> {
  for (const p of procs) p.kill('SIGTERM')
  await Promise.all(
    procs.map((p) => Promise.race([p.exited, Bun.sleep(5_000).then(() => p.kill('SIGKILL'))])),
  )
}

/** Each offer's in-flight cap: as told, else room for every client, split between the offers. */
export function offerCap(options: SizingOptions, replicas: number): number {
  const offers = options.offers ?? 1
  return (
    options.maxInFlight ?? (offers === 1 ? 100_000 : Math.ceil((replicas * options.clients) / offers) + 1)
  )
}

/**
 * A fresh keyspace on `redisUrl` with `options.offers` roomy offers on the supplier, their in-flight
 * caps splitting the load between them, and `options.accounts` funded accounts, a key each, for
 * each replica (held apart, accounts are what spreads the buyers' side over the masters).
 */
async function market(
  redisUrl: string,
  prefix: string,
  masterKey: string,
  upstreamUrl: string,
  replicas: number,
  options: SizingOptions,
): Promise<string[][]> {
  const config = loadGatewayConfig({
    REDIS_URL: redisUrl,
    SVC_REDIS_PREFIX: prefix,
    SVC_ADMIN_TOKEN: randomBytes(16).toString('hex'),
    SVC_MASTER_KEY: masterKey,
    SVC_UPSTREAM_URL: upstreamUrl,
  })
  const store = createStore(config.redisUrl, { name: 'svc-sizing' })
  try {
    await claimLayout(store, config.redisPrefix, options.layout ?? 'one-slot')
    const keys = keyspace(config.redisPrefix, options.layout)
    const offers = options.offers ?? 1
    const offerService = new OfferService(store, keys, config.masterKey)
    for (let i = 0; i < offers; i++) {
      await offerService.create({
        upstreamBaseUrl: upstreamUrl,
        upstreamApiKey: `sizing-${randomBytes(8).toString('hex')}`,
        askCents: 50,
        capacity: 1_000_000_000_000 as MicroDiem,
        maxInFlight: offerCap(options, replicas),
        supplier: 'sizing',
      })
    }
    const accounts = new AccountStore(store, keys)
    const fund = async () => {
      const created = await accounts.create(
        `0x${randomBytes(20).toString('hex')}`,
        config.defaultMaxPriceCents,
      )
      await accounts.credit(created.account.id, '100000.000000', 'sizing', 'sizing')
      return created.apiKey
    }
    const apiKeys: string[][] = []
    for (let i = 0; i < replicas; i++)
      apiKeys.push(await Promise.all(Array.from({ length: accountsOf(options) }, fund)))
    return apiKeys
  } finally {
    store.close()
  }
}

/** One cell of the table: `replicas` gateways on one Redis topology, loaded together. */
async function measure(
  redis: { url: string; ports: number[] },
  upstreamUrl: string,
  replicas: number,
  options: SizingOptions,
): Promise<Omit<SizingRow, 'masters'>> {
  const masterKey = randomBytes(32).toString('hex')
  const prefix = `sizing:{s${randomBytes(4).toString('hex')}}`
  const apiKeys = await market(redis.url, prefix, masterKey, upstreamUrl, replicas, options)
  const gateways = Array.from({ length: replicas }, () => {
    const port = freePort()
    const proc = Bun.spawn(self(['serve']), {
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        REDIS_URL: redis.url,
        SVC_REDIS_PREFIX: prefix,
        SVC_REDIS_LAYOUT: options.layout ?? 'one-slot',
        SVC_ADMIN_TOKEN: randomBytes(16).toString('hex'),
        SVC_MASTER_KEY: masterKey,
        SVC_UPSTREAM_URL: upstreamUrl,
        LOG_LEVEL: 'warn',
        // One key carries the load: its caps must not be what is measured.
        SVC_KEY_MAX_IN_FLIGHT: '100000',
        SVC_WALLET_MAX_IN_FLIGHT: '100000',
      },
      stdout: 'ignore',
      stderr: 'ignore',
    })
    return { proc, url: `http://127.0.0.1:${port}` }
  })
  try {
    await Promise.all(gateways.map((g) => waitForHttp(g.proc, `${g.url}/readyz`)))
    const drive = async (seconds: number) => {
      const loads = gateways.map((g, i) =>
        Bun.spawn(
          self([
            'sizing',
            'load',
            `${g.url}/v1/chat/completions`,
            apiKeys[i]!.join(','),
            String(options.clients),
            String(seconds),
          ]),
          { stdout: 'pipe', stderr: 'inherit' },
        ),
      )
      const counts = await Promise.all(
        loads.map(
          async (p) => JSON.parse(await new Response(p.stdout).text()) as { ok: number; failed: number },
        ),
      )
      return counts.reduce((sum, c) => ({ ok: sum.ok + c.ok, failed: sum.failed + c.failed }), {
        ok: 0,
        failed: 0,
      })
    }
    const warm = options.warmSeconds ?? WARM_SECONDS
    if (warm > 0) await drive(warm)
    const before = await serverCpu(redis.ports)
    const { ok, failed } = await drive(options.seconds)
    const after = await serverCpu(redis.ports)
    const spent = after.map((a, i) => a.all - before[i]!.all)
    const total = spent.reduce((sum, s) => sum + s, 0)
    const main = after.reduce((sum, a, i) => sum + a.main - before[i]!.main, 0)
    return {
      replicas,
      requestsPerSecond: ok / options.seconds,
      failed,
      redisUsPerRequest: ok > 0 ? (total * 1e6) / ok : 0,
      mainThreadUsPerRequest: ok > 0 ? (main * 1e6) / ok : 0,
      busiestShare: total > 0 ? Math.max(...spent) / total : 0,
    }
  } finally {
    await stopAll(gateways.map((g) => g.proc))
  }
}

export async function measureSizing(options: SizingOptions, progress = (_line: string) => {}) {
  // Every process this starts inherits the rest's cores; each master is then moved to its own.
  const plan = options.pin ? pinPlan(options.pin) : null
  const ownCpus = plan ? cpusOf(process.pid) : []
  if (plan) pinProcess(process.pid, plan.rest)
  const simPort = freePort()
  const sim = Bun.spawn(self(['sim']), {
    env: { ...process.env, SIM_PORT: String(simPort), SIM_HOST: '127.0.0.1', SIM_BALANCE_DIEM: '1000000000' },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const upstreamUrl = `http://127.0.0.1:${simPort}`
  const rows: SizingRow[] = []
  try {
    await waitForHttp(sim, `${upstreamUrl}/models`)
    const threads = options.ioThreads ?? 1
    const redisArgs = threads > 1 ? ['--io-threads', String(threads), '--io-threads-do-reads', 'yes'] : []
    for (const masters of options.masters) {
      const single = masters === 1 ? await startLocalRedis(redisArgs) : null
      const cluster = single ? null : await startLocalCluster(masters, redisArgs)
      const redis = single
        ? { url: single.url, ports: [single.port] }
        : { url: cluster!.url, ports: cluster!.nodes.map((n) => n.port) }
      try {
        if (plan) await pinServers(redis.ports, plan)
        for (const replicas of options.replicas) {
          progress(
            `${masters} master${masters > 1 ? 's' : ''}, ${replicas} replica${replicas > 1 ? 's' : ''}`,
          )
          rows.push({ masters, ...(await measure(redis, upstreamUrl, replicas, options)) })
        }
      } finally {
        await single?.stop()
        cluster?.stop()
      }
    }
  } finally {
    await stopAll([sim])
    if (plan) pinProcess(process.pid, ownCpus)
  }
  return rows
}

/** Master i on the plan's i-th Redis core. */
export async function pinServers(ports: number[], plan: PinPlan): Promise<void> {
  const pids = await serverPids(ports)
  for (const [i, pid] of pids.entries()) pinProcess(pid, [plan.redis[i]!])
}

const fixed = (n: number, digits: number) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })

export function sizingTable(rows: SizingRow[], options: SizingOptions): string {
  return [
    `Buffered paid chat (max_tokens 16), ${options.clients} clients per replica, ${options.seconds} s per row, ` +
      `${options.ioThreads ?? 1} Redis I/O thread${(options.ioThreads ?? 1) > 1 ? 's' : ''}, ` +
      `the market ${options.layout === 'apart' ? 'held apart' : 'on one slot'}, ${options.offers ?? 1} offer${(options.offers ?? 1) > 1 ? 's' : ''}${options.maxInFlight ? ` of ${options.maxInFlight} in flight each` : ''}, ${accountsOf(options)} accounts per replica` +
      (options.pin ? `, each master on a core of its own (${options.pin} kept for Redis).` : '.'),
    '',
    '| Redis masters | replicas | paid requests/s | failed | Redis CPU µs per request | of it on main threads | busiest master |',
    '|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.masters} | ${r.replicas} | ${fixed(r.requestsPerSecond, 0)} | ${r.failed} | ${fixed(r.redisUsPerRequest, 1)} | ${fixed(r.mainThreadUsPerRequest, 1)} | ${fixed(100 * r.busiestShare, 1)} % |`,
    ),
    '',
    'One Redis core carries about 1,000,000 ÷ (Redis CPU µs per request) paid requests/s when nothing',
    'else on the machine competes for it; plan each master at well below that.',
  ].join('\n')
}

export async function sizing(argv: string[]): Promise<void> {
  if (argv[0] === 'load') return load(argv.slice(1))
  const options = sizingOptions(argv)
  const rows = await measureSizing(options, (line) => console.error(`[sizing] ${line}`))
  console.log(sizingTable(rows, options))
}
