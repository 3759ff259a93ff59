// The benchmark, one command: `npm run bench` (full, writes BENCHMARKS.md) or
// `npm run bench -- --quick` (under a minute, prints only). On loopback it starts a real
// redis-server, the simulated supplier (zero latency; a slow-paced one for open streams), the
// compiled gateway (dist/svc-gateway) and the peer (Portkey's gateway, bench/node_modules, under
// Bun); the load comes from other processes (wrk, bench/stream-client.ts, bench/lua-pair.ts).
// Every scenario sends the same requests to the supplier directly, through the peer and through
// the gateway, warm-up first, then rounds with the three interleaved; medians of the rounds.
import { cpus, totalmem } from 'node:os'
import { join } from 'node:path'
import { pingRoundTripUs, stealMeter } from './machine-speed.ts'
import { commandOutput, cpuMs, rssBytes } from './procs.ts'
import {
  type Cell,
  type Check,
  checksTable,
  fmt,
  markdownTable,
  signed,
  type Table,
  writeBenchmarks,
} from './report.ts'
import {
  BenchStack,
  type Buyer,
  fundedBuyer,
  GATEWAY_BINARY,
  PEER_ENTRY,
  postOffer,
  ROOT,
  simFault,
  TARGETS,
  type Target,
  type TargetName,
  targets,
  WITH_FLOOR,
} from './stack.ts'
import { inRoundOrder, median } from './stats.ts'
import { oneStream, type StreamClientResult } from './stream-client.ts'
import { runStreamClient } from './streams.ts'
import { runWrk, type WrkResult } from './wrk.ts'

const quick = process.argv.includes('--quick')
const settings = quick
  ? { jitSeconds: 0, warmSeconds: 1, rounds: 1, seconds: 1, openStreams: 1000, openTokens: 4, luaSeconds: 1 }
  : { jitSeconds: 8, warmSeconds: 2, rounds: 5, seconds: 4, openStreams: 2000, openTokens: 20, luaSeconds: 3 }
/** Quick mode warms up once per family of scenarios, the full run before every level. */
const warmLevel = (index: number) => !quick || index === 0
const OPEN_TOKENS_PER_SECOND = 2
const PACED_PAUSE_MS = 200
/** Streams paced: 32 clients, each waiting 0..100 ms after a stream (a few hundred streams/s offered). */
const PACED_STREAM_PAUSE_MS = 50
const FAST_TOKENS = 24 // the simulated supplier's default completion length

const MODEL = 'llama-3.3-70b'
const messages = [{ role: 'user', content: 'Say hello to the benchmark.' }]
const bufferedBody = JSON.stringify({ model: MODEL, messages, max_tokens: 64 })
const streamBody = JSON.stringify({
  model: MODEL,
  messages,
  max_tokens: 64,
  stream: true,
  stream_options: { include_usage: true },
})

/** Each target's figures; the floor only where it was measured. */
type PerTarget<T> = Record<Exclude<TargetName, 'floor'>, T> & { floor?: T }

/** Rounds with the three targets interleaved (their order rotated one place a round), after a warm-up of each. */
async function rounds<T>(
  list: Target[],
  warm: ((t: Target) => Promise<unknown>) | null,
  measure: (t: Target) => Promise<T>,
): Promise<PerTarget<T[]>> {
  if (warm) for (const t of list) await warm(t)
  const out = Object.fromEntries(list.map((t) => [t.name, []])) as unknown as PerTarget<T[]>
  for (let r = 0; r < settings.rounds; r++) {
    for (const t of inRoundOrder(list, r)) out[t.name]!.push(await measure(t))
  }
  return out
}

/**
 * One buffered (and, unless told otherwise, one streamed) request through each target must succeed
 * before anything is measured: a broken build stops the run instead of timing its errors.
 */
async function preflight(list: Target[], stream = true): Promise<void> {
  for (const t of list) {
    const response = await fetch(t.url, { method: 'POST', headers: t.headers, body: bufferedBody })
    const text = await response.text()
    if (response.status !== 200)
      throw new Error(`${t.name} answered ${response.status}: ${text.slice(0, 400)}`)
    if (!stream) continue
    const streamed = await oneStream({
      url: t.url,
      headers: t.headers,
      body: streamBody,
      expectTokens: FAST_TOKENS,
    })
    if (!streamed.ok || !streamed.done || streamed.lost > 0)
      throw new Error(`${t.name} did not stream a whole answer: ${JSON.stringify(streamed)}`)
  }
}

interface Buffered {
  rps: number
  p50: number
  p99: number
  /** The serving process's CPU time per request (user + system), µs. */
  cpuUs: number
  errors: number
}

/** Names measured in `m`, in the order tables list them. */
const namesIn = <T>(m: PerTarget<T>) => WITH_FLOOR.filter((name) => name in m) as (keyof PerTarget<T>)[]

async function buffered(
  list: Target[],
  connections: number,
  dir: string,
  warm: boolean,
  pauseMs = 0,
): Promise<PerTarget<Buffered>> {
  const raw = await rounds<WrkResult & { cpuUs: number }>(
    list,
    warm ? (t) => runWrk(t, bufferedBody, connections, settings.warmSeconds, dir, pauseMs) : null,
    async (t) => {
      const before = cpuMs(t.pid)
      const result = await runWrk(t, bufferedBody, connections, settings.seconds, dir, pauseMs)
      return { ...result, cpuUs: ((cpuMs(t.pid) - before) * 1000) / Math.max(1, result.requests) }
    },
  )
  const out = {} as PerTarget<Buffered>
  for (const name of namesIn(raw)) {
    const runs = raw[name]!
    out[name] = {
      rps: median(runs.map((r) => r.rps)),
      p50: median(runs.map((r) => r.p50Ms)),
      p99: median(runs.map((r) => r.p99Ms)),
      cpuUs: median(runs.map((r) => r.cpuUs)),
      errors: runs.reduce((n, r) => n + r.errors, 0),
    }
  }
  return out
}

/** One row per target, its name first; `base` is true for the supplier called directly. */
function rowsOf<T>(m: PerTarget<T>, row: (x: T, base: boolean) => Cell[]): Cell[][] {
  return namesIn(m).map((name) => [name, ...row(m[name]!, name === 'direct')])
}

function bufferedTable(title: string, m: PerTarget<Buffered>, notes: string[] = []): Table {
  return {
    title,
    columns: [
      'target',
      'req/s',
      'p50 ms',
      'p99 ms',
      'added p50 ms',
      'added p99 ms',
      'req/s ÷ peer',
      'CPU µs per request',
      'CPU ÷ peer',
      'errors',
    ],
    rows: rowsOf(m, (x, base) => [
      x.rps,
      fmt(x.p50, 3),
      fmt(x.p99, 3),
      base ? '' : signed(x.p50 - m.direct.p50, 3),
      base ? '' : signed(x.p99 - m.direct.p99, 3),
      fmt(x.rps / m.peer.rps),
      fmt(x.cpuUs, 0),
      fmt(x.cpuUs / m.peer.cpuUs),
      x.errors,
    ]),
    notes,
  }
}

interface Streamed {
  rps: number
  ttfbP50: number
  ttfbP99: number
  totalP50: number
  totalP99: number
  lost: number
  unfinished: number
  errors: number
}

async function streamed(
  list: Target[],
  concurrency: number,
  warm: boolean,
  pauseMs = 0,
): Promise<PerTarget<Streamed>> {
  const job = (t: Target, seconds: number) =>
    runStreamClient({
      mode: 'loop',
      url: t.url,
      headers: t.headers,
      body: streamBody,
      expectTokens: FAST_TOKENS,
      concurrency,
      durationMs: seconds * 1000,
      pauseMs,
    })
  const raw = await rounds<StreamClientResult>(list, warm ? (t) => job(t, settings.warmSeconds) : null, (t) =>
    job(t, settings.seconds),
  )
  const out = {} as PerTarget<Streamed>
  for (const name of namesIn(raw)) {
    const runs = raw[name]!
    const mid = (f: (r: StreamClientResult) => number) => median(runs.map(f))
    const total = (f: (r: StreamClientResult) => number) => runs.reduce((n, r) => n + f(r), 0)
    out[name] = {
      rps: mid((r) => r.rps),
      ttfbP50: mid((r) => r.ttfbP50),
      ttfbP99: mid((r) => r.ttfbP99),
      totalP50: mid((r) => r.totalP50),
      totalP99: mid((r) => r.totalP99),
      lost: total((r) => r.lost),
      unfinished: total((r) => r.unfinished),
      errors: total((r) => r.errors),
    }
  }
  return out
}

function streamTable(title: string, m: PerTarget<Streamed>): Table {
  return {
    title,
    columns: [
      'target',
      'streams/s',
      'TTFB p50 ms',
      'TTFB p99 ms',
      'added TTFB p50 ms',
      'total p50 ms',
      'total p99 ms',
      'added total p50 ms',
      'streams/s ÷ peer',
      'frames lost',
      'unfinished',
      'errors',
    ],
    rows: rowsOf(m, (x, base) => [
      x.rps,
      fmt(x.ttfbP50, 3),
      fmt(x.ttfbP99, 3),
      base ? '' : signed(x.ttfbP50 - m.direct.ttfbP50, 3),
      fmt(x.totalP50, 3),
      fmt(x.totalP99, 3),
      base ? '' : signed(x.totalP50 - m.direct.totalP50, 3),
      fmt(x.rps / m.peer.rps),
      x.lost,
      x.unfinished,
      x.errors,
    ]),
  }
}

interface OpenStreams {
  opened: number
  openMs: number
  rssBefore: number
  rssOpen: number
  perStreamKb: number
  result: StreamClientResult
}

/** `n` streams held open at once; memory per stream from the serving process's RSS delta. */
async function openStreams(t: Target, n: number, expectTokens: number): Promise<OpenStreams> {
  const job = (streams: number) => ({
    mode: 'open' as const,
    url: t.url,
    headers: t.headers,
    body: streamBody,
    expectTokens,
    streams,
    rampMs: Math.max(200, streams),
  })
  if (!quick) await runStreamClient(job(Math.min(200, n))) // warm-up: code paths, pools, heaps
  await Bun.sleep(500)
  const rssBefore = await rssBytes(t.pid)
  let rssOpen = 0
  let opened = 0
  let openMs = 0
  const result = await runStreamClient(job(n), async (count, ms) => {
    opened = count
    openMs = ms
    await Bun.sleep(500)
    rssOpen = await rssBytes(t.pid)
  })
  return { opened, openMs, rssBefore, rssOpen, perStreamKb: (rssOpen - rssBefore) / 1024 / opened, result }
}

interface LuaPair {
  pairsPerSecond: number
  trivialPerSecond: number
  redisUsPerPair: number
  redisUsPerTrivial: number
  ratio: number
  floorPerSecond: number
  redisUsPerFloor: number
  floorRatio: number
}

async function luaPair(redisUrl: string): Promise<LuaPair> {
  const proc = Bun.spawn(
    [
      process.execPath,
      join(import.meta.dir, 'lua-pair.ts'),
      JSON.stringify({ seconds: settings.luaSeconds, rounds: settings.rounds, concurrency: 32 }),
    ],
    { stdout: 'pipe', stderr: 'inherit', env: { ...process.env, TEST_REDIS_URL: redisUrl } },
  )
  const out = await new Response(proc.stdout).text()
  await proc.exited
  const line = out.split('\n').find((l) => l.startsWith('RESULT '))
  if (!line) throw new Error(`lua-pair printed no result: ${out}`)
  return JSON.parse(line.slice('RESULT '.length)) as LuaPair
}

function machine(speed: { pingUs: number; stealPercent: number }): string[] {
  const cpu = cpus()
  const peer = JSON.parse(
    commandOutput(['cat', join(ROOT, 'bench/node_modules/@portkey-ai/gateway/package.json')]) || '{}',
  ) as { version?: string }
  const version = (pkg: string) =>
    (
      JSON.parse(commandOutput(['cat', join(ROOT, `bench/node_modules/${pkg}/package.json`)]) || '{}') as {
        version?: string
      }
    ).version ?? '?'
  const head = commandOutput(['git', '-C', ROOT, 'rev-parse', '--short', 'HEAD'])
  const dirty = commandOutput(['git', '-C', ROOT, 'status', '--porcelain', '--untracked-files=no'])
    ? ' (uncommitted changes)'
    : ''
  return [
    `- Machine: ${cpu.length} × ${cpu[0]?.model ?? '?'}, ${Math.round(totalmem() / 2 ** 30)} GiB, ${commandOutput(['uname', '-sr'])}; shared with other work, so figures are noisy: read the ratios.`,
    `- Gateway: svc-gateway ${commandOutput([join(ROOT, 'dist/svc-gateway'), '--version'])} at ${head}${dirty}, compiled binary, billing in Redis on.`,
    `- Peer: @portkey-ai/gateway ${peer.version ?? '?'} (hono ${version('hono')}, @hono/node-server ${version('@hono/node-server')}) under Bun ${Bun.version}, no cache, no logging backend.`,
    `- Runtime: Bun ${Bun.version}; ${commandOutput(['redis-server', '--version']).split(' ').slice(0, 3).join(' ')}; ${commandOutput(['wrk', '-v']).split('\n')[0]}.`,
    `- Machine speed during this run: a sequential Redis PING from Bun took ${fmt(speed.pingUs, 1)} µs a round trip, and the hypervisor took ${fmt(speed.stealPercent, 1)} % of the CPU time (steal): compare absolute figures across runs only when these are close.`,
    `- Command: \`npm run bench\`${quick ? ' -- --quick' : ''} (${settings.rounds} rounds of ${settings.seconds} s per target after a ${settings.warmSeconds} s warm-up${settings.jitSeconds > 0 ? `, every target first warmed ${settings.jitSeconds} s buffered and ${settings.jitSeconds / 2} s streamed at 32 clients` : ''}; medians of the rounds' p50 and p99).`,
  ]
}

async function main(): Promise<void> {
  const stack = new BenchStack()
  const tables: Table[] = []
  const checks: Check[] = []
  const steal = stealMeter()
  const speed = { pingUs: Number.NaN, stealPercent: Number.NaN }
  const say = (line: string) => console.error(`[bench] ${line}`)
  // Ctrl-C stops every process the run started, not only this one.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void stack.stop().finally(() => process.exit(130))
    })
  }
  try {
    if (!Bun.which('wrk')) throw new Error('wrk is not installed (Debian: apt-get install wrk)')
    if (!(await Bun.file(PEER_ENTRY).exists()))
      throw new Error('the peer is not installed: npm install in bench/')
    await stack.startRedis()
    speed.pingUs = await pingRoundTripUs(stack.redis.url)
    const sim = await stack.startSim('sim')
    const gateway = await stack.startGateway('gateway', sim.url)
    const peer = await stack.startPeer('peer')
    const upstreamKey = 'bench-supplier'
    await postOffer(gateway, sim, upstreamKey, 50)
    const buyer: Buyer = await fundedBuyer(gateway)
    const floor = await stack.startFloor('floor', sim.url, buyer.apiKey)
    const byName = targets(sim, upstreamKey, peer, gateway, buyer, floor)
    const withFloor = WITH_FLOOR.map((name) => byName[name])
    say(`logs in ${stack.logDir}`)
    await preflight(withFloor)
    // Every target's code compiled to its top tier before the first level is measured: a level's
    // own short warm-up leaves the JIT still at work in its rounds. All four get the same load.
    if (settings.jitSeconds > 0) {
      say(`warm-up: ${settings.jitSeconds} s buffered and ${settings.jitSeconds / 2} s streamed per target`)
      for (const t of withFloor) {
        await runWrk(t, bufferedBody, 32, settings.jitSeconds, stack.logDir)
        await runStreamClient({
          mode: 'loop',
          url: t.url,
          headers: t.headers,
          body: streamBody,
          expectTokens: FAST_TOKENS,
          concurrency: 32,
          durationMs: (settings.jitSeconds / 2) * 1000,
        })
      }
    }

    const levels: [number, string][] = [
      [1, '1 client'],
      [32, '32 clients'],
      [200, '200 clients'],
    ]
    const bufferedAt: Record<number, PerTarget<Buffered>> = {}
    for (const [i, [connections, label]] of levels.entries()) {
      say(`buffered chat, ${label}`)
      const m = await buffered(withFloor, connections, stack.logDir, warmLevel(i))
      bufferedAt[connections] = m
      tables.push(bufferedTable(`Buffered chat, ${label}`, m))
    }
    // 200 clients flat out saturate two cores: latency is then queueing (clients ÷ throughput), not
    // overhead. Paced, each client waiting ~200 ms between requests (~1,000 req/s offered), the
    // latency added by a hop can be read.
    say('buffered chat, 200 clients paced')
    const b200 = await buffered(withFloor, 200, stack.logDir, !quick, PACED_PAUSE_MS)
    tables.push(
      bufferedTable(
        `Buffered chat, 200 clients paced (each waits 0..${2 * PACED_PAUSE_MS} ms between requests)`,
        b200,
      ),
    )
    const b1 = bufferedAt[1]!
    const b32 = bufferedAt[32]!
    const added = (m: PerTarget<Buffered>, k: 'p50' | 'p99', who: 'gateway' | 'peer' = 'gateway') =>
      m[who][k] - m.direct[k]
    // A ratio to what the peer added, while that is above zero; a peer faster than the supplier
    // alone (noise at a tail) has no ratio, and dividing by it would turn the comparison round.
    const addedAgainst = (k: 'p50' | 'p99') => {
      const peer = added(b1, k, 'peer')
      return peer > 0
        ? `${fmt(added(b1, k) / peer)} × peer`
        : `the peer added ${signed(peer, 3)} ms (the supplier alone was slower there)`
    }
    checks.push(
      {
        target: "1 client: added p50 <= 0.75 × the peer's",
        measured: `${signed(added(b1, 'p50'), 3)} ms, ${addedAgainst('p50')}`,
        met: added(b1, 'p50') <= 0.75 * added(b1, 'p50', 'peer'),
      },
      {
        target: "1 client: added p99 <= the peer's",
        measured: `${signed(added(b1, 'p99'), 3)} ms, ${addedAgainst('p99')}`,
        met: added(b1, 'p99') <= added(b1, 'p99', 'peer'),
      },
      {
        target: '32 clients: req/s >= 1.5 × peer',
        measured: `${fmt(b32.gateway.rps / b32.peer.rps)} × peer`,
        met: b32.gateway.rps >= 1.5 * b32.peer.rps,
      },
      {
        target: "32 clients: CPU per request <= 0.5 × the peer's",
        measured: `${fmt(b32.gateway.cpuUs, 0)} µs, ${fmt(b32.gateway.cpuUs / b32.peer.cpuUs)} × peer`,
        met: b32.gateway.cpuUs <= 0.5 * b32.peer.cpuUs,
      },
      {
        target: '200 clients (paced): added p50 <= 1 ms',
        measured: `${signed(added(b200, 'p50'), 3)} ms`,
        met: added(b200, 'p50') <= 1,
      },
      {
        target: '200 clients (paced): added p99 <= 5 ms',
        measured: `${signed(added(b200, 'p99'), 3)} ms`,
        met: added(b200, 'p99') <= 5,
      },
    )

    for (const [i, [concurrency, label]] of [levels[0]!, levels[1]!].entries()) {
      say(`streamed chat, ${label}`)
      const m = await streamed(withFloor, concurrency, warmLevel(i))
      tables.push(streamTable(`Streamed chat, ${label}`, m))
      const addedTtfb = m.gateway.ttfbP50 - m.direct.ttfbP50
      // At one client a stream's first byte should cost no more than a whole buffered call adds;
      // at 32 back to back the first byte queues behind the others (see "Targets" above).
      const ttfbBound = concurrency === 1 ? added(b1, 'p50') : 1
      checks.push(
        {
          target:
            concurrency === 1
              ? `streams, ${label}: added TTFB p50 <= the buffered added p50`
              : `streams, ${label}: added TTFB p50 <= 1 ms`,
          measured: `${signed(addedTtfb, 3)} ms${concurrency === 1 ? ` against ${signed(ttfbBound, 3)} ms` : ''}`,
          met: addedTtfb <= ttfbBound,
        },
        {
          target: `streams, ${label}: no frame lost`,
          measured: `${m.gateway.lost} lost, ${m.gateway.unfinished} unfinished, ${m.gateway.errors} errors`,
          met: m.gateway.lost === 0 && m.gateway.unfinished === 0 && m.gateway.errors === 0,
        },
      )
    }

    // 32 streams back to back saturate both cores, so their first byte is mostly queueing (Little's
    // law: 32 ÷ streams/s). Paced, as the 200 buffered clients are, the added first byte of
    // concurrent streams can be read apart from the throughput.
    say('streamed chat, 32 clients paced')
    const s32paced = await streamed(withFloor, 32, !quick, PACED_STREAM_PAUSE_MS)
    tables.push(
      streamTable(
        `Streamed chat, 32 clients paced (each waits 0..${2 * PACED_STREAM_PAUSE_MS} ms between streams)`,
        s32paced,
      ),
    )
    const pacedTtfb = s32paced.gateway.ttfbP50 - s32paced.direct.ttfbP50
    checks.push(
      {
        target: 'streams, 32 clients (paced): added TTFB p50 <= 1 ms',
        measured: `${signed(pacedTtfb, 3)} ms`,
        met: pacedTtfb <= 1,
      },
      {
        target: 'streams, 32 clients (paced): no frame lost',
        measured: `${s32paced.gateway.lost} lost, ${s32paced.gateway.unfinished} unfinished, ${s32paced.gateway.errors} errors`,
        met:
          s32paced.gateway.lost === 0 && s32paced.gateway.unfinished === 0 && s32paced.gateway.errors === 0,
      },
    )

    // Fall-forward: a cheaper offer whose upstream key answers 503 before any byte, on every call.
    // The gateway admits it, fails, releases, and falls forward to the working offer; the peer is
    // given the same two keys as a fallback config; direct is the one working call.
    say('fall-forward')
    const failingKey = 'bench-failing-supplier'
    await simFault(sim, failingKey, 'error_5xx')
    await postOffer(gateway, sim, failingKey, 30)
    const fallback = {
      strategy: { mode: 'fallback' },
      targets: [failingKey, upstreamKey].map((key) => ({
        provider: 'openai',
        api_key: key,
        custom_host: sim.url,
      })),
    }
    const { 'x-portkey-provider': _p, 'x-portkey-custom-host': _h, ...peerBase } = byName.peer.headers
    const ffList = [
      byName.direct,
      { ...byName.peer, headers: { ...peerBase, 'x-portkey-config': JSON.stringify(fallback) } },
      byName.gateway,
    ]
    await preflight(ffList, false)
    const ffLevels = quick ? [levels[1]!] : [levels[0]!, levels[1]!]
    for (const [i, [connections, label]] of ffLevels.entries()) {
      const m = await buffered(ffList, connections, stack.logDir, warmLevel(i))
      const normal = bufferedAt[connections]!.gateway
      tables.push(
        bufferedTable(`Fall-forward (first key fails before any byte), ${label}`, m, [
          `The gateway's cost of one failed key at this level: ${signed(m.gateway.p50 - normal.p50, 3)} ms p50, ${signed(m.gateway.p99 - normal.p99, 3)} ms p99, ${fmt(m.gateway.rps / normal.rps)} × the req/s of its working path above (different minutes of the same run).`,
        ]),
      )
      checks.push({
        target: `fall-forward, ${label}: every request answered 200`,
        measured: `${m.gateway.errors} errors`,
        met: m.gateway.errors === 0,
      })
    }

    say('admit + clear Lua pair')
    // Over loopback TCP, as in every run before the gateway moved to the socket: the ratio's baseline
    // (a trivial script) gains far more from the socket than the Redis-bound pair does.
    const lua = await luaPair(stack.redis.url)
    tables.push({
      title: 'The admit + clear Lua pair against a trivial EVALSHA (one Redis, 32 loops, auto-pipelined)',
      columns: [
        'pairs/s',
        'trivial EVALSHA/s',
        'pairs ÷ trivial',
        'Redis µs per pair',
        'Redis µs per trivial',
        'Redis-bound ceiling, pairs/s',
        'floor pairs/s',
        'floor ÷ trivial',
        'Redis µs per floor pair',
      ],
      rows: [
        [
          lua.pairsPerSecond,
          lua.trivialPerSecond,
          fmt(lua.ratio, 3),
          fmt(lua.redisUsPerPair, 1),
          fmt(lua.redisUsPerTrivial, 2),
          1e6 / lua.redisUsPerPair,
          lua.floorPerSecond,
          fmt(lua.floorRatio, 3),
          fmt(lua.redisUsPerFloor, 1),
        ],
      ],
      notes: [
        "Redis µs: the server's own time inside EVALSHA and FCALL (INFO commandstats; the pair's scripts run as functions, the trivial one by EVALSHA) per pair or per trivial call; the ceiling is what one Redis core could clear if nothing else cost anything.",
        'The floor pair (bench/floor-lua, EVALSHA, never run by the gateway) is the least an admit and a clear that hold money in Redis must do: read the balance, the cheapest offer and its capacity, hold on both sides, then charge, return the rest, burn and credit, 12 commands in all, with no caps, lease, reaping, replay check, record or usage stats. What it reaches against the trivial script bounds what any such design could.',
      ],
    })
    checks.push(
      {
        target: 'admit + clear: >= 10,000 pairs/s',
        measured: `${fmt(lua.pairsPerSecond)} pairs/s`,
        met: lua.pairsPerSecond >= 10_000,
      },
      {
        target: 'admit + clear: >= 1/3 of the trivial-script rate',
        measured: `${fmt(lua.ratio, 3)}`,
        met: lua.ratio >= 1 / 3,
      },
    )

    // Open streams: a slow supplier keeps them open; fresh peer and gateway processes, so the
    // memory measured is theirs for these streams only.
    say(`${settings.openStreams} open streams`)
    const slowSim = await stack.startSim('sim-slow', {
      SIM_TOKENS_PER_SECOND: String(OPEN_TOKENS_PER_SECOND),
      SIM_OUTPUT_TOKENS: String(settings.openTokens),
    })
    const gateway2 = await stack.startGateway('gateway-open', slowSim.url)
    const peer2 = await stack.startPeer('peer-open')
    await postOffer(gateway2, slowSim, upstreamKey, 50)
    const buyer2 = await fundedBuyer(gateway2)
    const openTargets = targets(slowSim, upstreamKey, peer2, gateway2, buyer2)
    await preflight(
      TARGETS.map((name) => openTargets[name]),
      false,
    )
    const open = {} as PerTarget<OpenStreams>
    for (const name of TARGETS) {
      open[name] = await openStreams(openTargets[name], settings.openStreams, settings.openTokens)
    }
    tables.push({
      title: `${settings.openStreams} concurrent open streams (supplier paced at ${OPEN_TOKENS_PER_SECOND} tokens/s, ${settings.openTokens} tokens)`,
      columns: [
        'target',
        'streams open',
        'all open after ms',
        'RSS before MB',
        'RSS open MB',
        'KB per stream',
        'KB per stream ÷ peer',
        'frames lost',
        'unfinished',
        'errors',
      ],
      rows: rowsOf(open, (x) => [
        x.opened,
        x.openMs,
        x.rssBefore / 2 ** 20,
        x.rssOpen / 2 ** 20,
        fmt(x.perStreamKb, 1),
        fmt(x.perStreamKb / open.peer.perStreamKb),
        x.result.lost,
        x.result.unfinished,
        x.result.errors,
      ]),
      notes: [
        `Memory is the serving process's resident set: "direct" is the simulated supplier itself, peer and gateway are fresh processes${quick ? '' : ' warmed with 200 streams'}.`,
      ],
    })
    const g = open.gateway
    checks.push(
      {
        target: `${settings.openStreams} open streams, none lost`,
        measured: `${g.opened} open, ${g.result.lost} frames lost, ${g.result.unfinished} unfinished, ${g.result.errors} errors`,
        met:
          g.opened === settings.openStreams &&
          g.result.lost === 0 &&
          g.result.unfinished === 0 &&
          g.result.errors === 0,
      },
      {
        target: 'open streams: <= 30 KB per stream',
        measured: `${fmt(g.perStreamKb, 1)} KB`,
        met: g.perStreamKb <= 30,
      },
    )
  } finally {
    speed.stealPercent = steal()
    await stack.stop()
  }

  // Scale-out last, on its own processes: the operator's `sizing` command, from the compiled binary,
  // for the market on one slot and held apart (where a Cluster's masters share it).
  const scaleOut: string[] = []
  for (const layout of ['one-slot', 'apart']) {
    say(`scale-out: Redis masters x replicas, ${layout}`)
    const args = ['sizing', '--seconds', quick ? '1' : '3', '--layout', layout, '--offers', '6']
    const sizing = Bun.spawn([GATEWAY_BINARY, ...args], { stdout: 'pipe', stderr: 'inherit' })
    scaleOut.push((await new Response(sizing.stdout).text()).trim(), '')
    if ((await sizing.exited) !== 0) throw new Error(`svc-gateway sizing --layout ${layout} failed`)
  }

  const generated = [
    `## Results${quick ? ' (quick mode)' : ''}, ${new Date().toISOString()}`,
    '',
    ...machine(speed),
    '',
    'Latencies in milliseconds; "added" is against the supplier called directly in the same rounds; "÷ peer" is the ratio to the peer in the same rounds.',
    '',
    checksTable(checks),
    '',
    ...tables.flatMap((t) => [markdownTable(t), '']),
    '### Scale-out: Redis masters and gateway replicas (`svc-gateway sizing --layout one-slot|apart --offers 6`)',
    '',
    ...scaleOut,
  ].join('\n')
  console.log(generated)
  if (!quick) {
    writeBenchmarks(join(ROOT, 'BENCHMARKS.md'), generated)
    console.error('[bench] written into BENCHMARKS.md')
  }
}

await main()
