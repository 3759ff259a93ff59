// The soak: many requests through three replicas of the compiled binary on one AOF redis-server
// (appendfsync always), the simulated supplier failing at random, clients leaving mid-way,
// replicas and Redis killed -9 on a schedule. At the end, against the records
// (GET /v1/agent/requests/{ref}): every cost a client was told is what it was charged; every
// "nothing charged" charged nothing; every 5xx and stream error code is the contract's; and
// `svc-gateway audit` passes. Prints a summary table; exits 1 on any violation.
//
//   npm run soak -- --requests 2000 --concurrency 16 --replica-kill-every 10 --redis-kill-every 25
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { parseMicros } from '../src/money/units.ts'
import { freePort, type LocalRedis, startLocalRedis } from '../src/redis/local-server.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import {
  type Buyer,
  call,
  fundedBuyer,
  randomFaults,
  runAudit,
  settled,
  simOffer,
  startCluster,
} from './cluster.ts'
import { CONTRACT_5XX, KINDS, type SoakOutcome, soakRequest } from './soak-client.ts'

const { values: flags } = parseArgs({
  options: {
    requests: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '16' },
    'replica-kill-every': { type: 'string', default: '10' },
    'redis-kill-every': { type: 'string', default: '25' },
    'abort-share': { type: 'string', default: '0.05' },
    binary: { type: 'string', default: 'dist/svc-gateway' },
  },
})
const requests = Number(flags.requests)
const concurrency = Number(flags.concurrency)
const replicaKillEveryMs = Number(flags['replica-kill-every']) * 1000
const redisKillEveryMs = Number(flags['redis-kill-every']) * 1000
const abortShare = Number(flags['abort-share'])

/** Stream error codes a client may see at a stream's end. */
const STREAM_CODES = ['stream_incomplete', 'settle_failed', 'store_unavailable', 'provider_error']

const root = join(import.meta.dir, '..')
const binary = join(root, flags.binary)
if (!existsSync(binary)) {
  const build = Bun.spawn(['npm', 'run', 'build'], { cwd: root, stdout: 'inherit', stderr: 'inherit' })
  if ((await build.exited) !== 0) process.exit(1)
}

const AOF = ['--appendonly', 'yes', '--appendfsync', 'always']
const dir = mkdtempSync(join(tmpdir(), 'svc-soak-aof-'))
const port = freePort()
let server: LocalRedis = await startLocalRedis(AOF, port, dir)
const sim = startSim({ port: 0, tokensPerSecond: 400, outputTokens: 30 })
const cluster = await startCluster({
  redisUrl: server.url,
  sim,
  replicas: 3,
  command: [binary, 'serve'],
  // Streams' clears keep trying for a Redis restart (a second or two), not the default 30 s.
  env: { SVC_STREAM_SETTLE_WAIT_MS: '10000', SVC_KEEPALIVE_MS: '1000', SVC_WALLET_MAX_IN_FLIGHT: '256' },
})
const started = Date.now()

const upstreamKeys = [
  await simOffer(cluster, sim, 40),
  await simOffer(cluster, sim, 45),
  await simOffer(cluster, sim, 50),
]
const buyers: Buyer[] = []
for (let i = 0; i < 8; i++) buyers.push(await fundedBuyer(cluster, '1000.000000'))
const faults = randomFaults(sim, upstreamKeys, 250)

// Replicas a client may pick: killed ones leave the set until they are serving again.
const alive = new Set([0, 1, 2])
const kills = { replicas: 0, redis: 0 }
let redisDown: Promise<void> | null = null

async function restartReplica(index: number) {
  for (;;) {
    try {
      await cluster.start(index)
      alive.add(index)
      return
    } catch {
      // Redis may be down: a replica does not serve until it is back. Try again with a new one.
      cluster.replicas[index]?.child.kill('SIGKILL')
      await Bun.sleep(500)
    }
  }
}

const restarts: Promise<void>[] = []
const replicaKiller = setInterval(() => {
  if (alive.size < 2) return
  const index = [...alive][Math.floor(Math.random() * alive.size)]!
  alive.delete(index)
  cluster.replicas[index]!.child.kill('SIGKILL')
  kills.replicas++
  restarts.push(restartReplica(index))
}, replicaKillEveryMs)

const redisKiller = setInterval(() => {
  if (redisDown) return
  kills.redis++
  redisDown = (async () => {
    await server.kill()
    await Bun.sleep(1_000)
    server = await startLocalRedis(AOF, port, dir)
  })().finally(() => {
    redisDown = null
  })
}, redisKillEveryMs)

type Sent = SoakOutcome & { apiKey: string }
const outcomes: Sent[] = []
let issued = 0
const pick = <T>(list: T[]) => list[Math.floor(Math.random() * list.length)]!
async function worker() {
  while (issued < requests) {
    issued++
    const replica = cluster.replicas[pick([...alive])]!
    const buyer = pick(buyers)
    const abortAfter = Math.random() < abortShare ? Math.floor(Math.random() * 150) : null
    const outcome = await soakRequest(replica.url, buyer.apiKey, pick(KINDS), abortAfter)
    outcomes.push({ ...outcome, apiKey: buyer.apiKey })
    if (outcome.status === 503 || outcome.status === 429 || outcome.transport) await Bun.sleep(50)
  }
}
await Promise.all(Array.from({ length: concurrency }, worker))
clearInterval(replicaKiller)
clearInterval(redisKiller)
const injected = faults.stop()
await redisDown
await Promise.all(restarts)

const observer = createStore(server.url, { name: 'soak-observer' })
const violations: string[] = []
try {
  await settled(observer, cluster.prefix, 60_000)
  const url = cluster.replicas[0]!.url
  for (let i = 0; i < 200 && (await fetch(`${url}/readyz`)).status !== 200; i++) await Bun.sleep(100)

  // Each request's record, by its support reference.
  const records = new Map<Sent, { found: boolean; charged: number }>()
  const withReference = outcomes.filter((o) => o.supportReference)
  for (let i = 0; i < withReference.length; i += 16) {
    await Promise.all(
      withReference.slice(i, i + 16).map(async (o) => {
        const response = await call(
          url,
          `/v1/agent/requests/${o.supportReference}`,
          o.apiKey,
          undefined,
          'GET',
        )
        if (response.status === 404) return records.set(o, { found: false, charged: 0 })
        if (response.status !== 200) throw new Error(`record ${o.supportReference}: ${response.status}`)
        const view = (await response.json()) as { costUsdc: string | null }
        records.set(o, {
          found: true,
          charged: view.costUsdc === null ? 0 : (parseMicros(view.costUsdc) ?? 0),
        })
      }),
    )
  }
  for (const o of outcomes) {
    const record = records.get(o)
    const label = `${o.kind} ${o.status} ${o.code ?? ''} ${o.supportReference ?? '(no reference)'}`
    if (o.told === 'cost' && (!record || record.charged !== o.cost))
      violations.push(`told ${o.cost} micro-USDC, record says ${record?.charged ?? 'nothing'}: ${label}`)
    if (o.told === 'nothing' && record && record.charged !== 0)
      violations.push(`told nothing was charged, record says ${record.charged}: ${label}`)
    if (o.status >= 500 && !CONTRACT_5XX[o.status]?.includes(o.code ?? ''))
      violations.push(`not a contract 5xx: ${label}`)
    if (o.status === 200 && o.code !== null && !STREAM_CODES.includes(o.code))
      violations.push(`not a contract stream error: ${label}`)
    if (o.code === 'not-error-shape') violations.push(`not the error shape: ${label}`)
  }
  const audit = await runAudit(server.url, cluster.prefix)
  if (audit.code !== 0) violations.push(`audit: ${audit.output.trim()}`)

  const count = (f: (o: Sent) => boolean) => outcomes.filter(f).length
  const unknownCharged = [...records].filter(([o, r]) => o.told === 'unknown' && r.charged > 0).length
  const rows: [string, string][] = [
    ['requests', `${outcomes.length} (${KINDS.map((k) => `${k} ${count((o) => o.kind === k)}`).join(', ')})`],
    ['concurrency', String(concurrency)],
    ['duration', `${Math.round((Date.now() - started) / 1000)} s`],
    [
      'kills',
      `${kills.replicas} replica kill -9s (every ${replicaKillEveryMs / 1000} s), ${kills.redis} Redis kill -9s (every ${redisKillEveryMs / 1000} s)`,
    ],
    ['supplier faults injected', String(injected)],
    ['statuses', JSON.stringify(countBy(outcomes.map((o) => `${o.status}${o.code ? ` ${o.code}` : ''}`)))],
    [
      'told a cost',
      `${count((o) => o.told === 'cost')}: every one equal to its record: ${violations.some((v) => v.startsWith('told ') && !v.startsWith('told nothing')) ? 'NO' : 'yes'}`,
    ],
    [
      'told nothing charged',
      `${count((o) => o.told === 'nothing')}: every record charges nothing: ${violations.some((v) => v.startsWith('told nothing')) ? 'NO' : 'yes'}`,
    ],
    [
      'told no outcome',
      `${count((o) => o.told === 'unknown')} (store_unavailable ${count((o) => o.code === 'store_unavailable')}, client aborts ${count((o) => o.transport === 'client_abort')}, connections cut ${count((o) => o.aborted && o.transport !== 'client_abort')}); ${unknownCharged} of them charged, per their records`,
    ],
    [
      '5xx and stream codes',
      violations.some((v) => v.startsWith('not ')) ? 'some outside the contract' : "all the contract's",
    ],
    ['svc-gateway audit', audit.code === 0 ? 'every invariant holds' : 'FAILED'],
    ['violations', String(violations.length)],
  ]
  console.log('\n| Soak | |\n|---|---|')
  for (const [name, value] of rows) console.log(`| ${name} | ${value} |`)
  for (const v of violations.slice(0, 50)) console.log(`violation: ${v}`)
} finally {
  observer.close()
  await cluster.stop()
  await sim.stop()
  await server.stop()
  rmSync(dir, { recursive: true, force: true })
}
process.exit(violations.length === 0 ? 0 : 1)

function countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1
  return counts
}
