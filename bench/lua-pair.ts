// The market's admit + clear Lua pair alone, against the rate of a trivial EVALSHA on the same
// Redis, from the same client, in the same run. A process of its own (the parent passes
// TEST_REDIS_URL); the fixtures are the market tests' own, so the keyspace is the real one. Beside
// them, a floor pair (bench/floor-lua): the least an admit and a clear that hold money in Redis
// must do, to show what ratio to the trivial script any such design could reach.
//   argv: JSON {seconds, rounds, concurrency}; prints `RESULT {...}`.
import { randomUUID } from 'node:crypto'
import type { Admission } from '../src/market/admission.ts'
import { AdmitCode } from '../src/redis/result-codes.ts'
import type { Store } from '../src/redis/store.ts'
import { admitFor, clearFor, marketFixture, postOffer, seedAccount } from '../test/helpers/market.ts'
import floorAdmit from './floor-lua/admit.lua' with { type: 'text' }
import floorClear from './floor-lua/clear.lua' with { type: 'text' }
import { median } from './stats.ts'

export interface LuaPairResult {
  pairsPerSecond: number
  trivialPerSecond: number
  /** Redis's own CPU per call (INFO commandstats, evalsha + fcall), microseconds: where the time goes. */
  redisUsPerPair: number
  redisUsPerTrivial: number
  /** pairs/s over trivial scripts/s */
  ratio: number
  /** The floor pair (bench/floor-lua): its rate, its Redis µs, its ratio to the trivial script. */
  floorPerSecond: number
  redisUsPerFloor: number
  floorRatio: number
  rounds: { pairs: number; trivial: number; floor: number }[]
}

interface Job {
  seconds: number
  rounds: number
  concurrency: number
}

/** Redis's count and total microseconds of script calls so far: EVALSHA and FCALL alike. */
async function evalshaStats(store: Store): Promise<{ calls: number; usec: number }> {
  const info = (await store.info('commandstats')) as string
  const total = { calls: 0, usec: 0 }
  for (const match of info.matchAll(/cmdstat_(?:evalsha|fcall):calls=(\d+),usec=(\d+)/g)) {
    total.calls += Number(match[1])
    total.usec += Number(match[2])
  }
  return total
}

/** Redis microseconds per call of `run` (one call = `scripts` script calls), and the calls per second. */
async function measured(store: Store, scripts: number, run: () => Promise<number>) {
  const before = await evalshaStats(store)
  const perSecond = await run()
  const after = await evalshaStats(store)
  const calls = (after.calls - before.calls) / scripts
  return { perSecond, usPerCall: calls > 0 ? (after.usec - before.usec) / calls : Number.NaN }
}

/** Calls per second of `call`, from `concurrency` loops for `seconds`. */
async function rate(concurrency: number, seconds: number, call: () => Promise<void>): Promise<number> {
  let calls = 0
  const start = performance.now()
  const deadline = start + seconds * 1000
  const loop = async () => {
    while (performance.now() < deadline) {
      await call()
      calls += 1
    }
  }
  await Promise.all(Array.from({ length: concurrency }, loop))
  return calls / ((performance.now() - start) / 1000)
}

async function main(job: Job): Promise<LuaPairResult> {
  const fx = marketFixture()
  const store = fx.store
  const accountId = await seedAccount(fx, 1_000_000_000_000)
  await postOffer(fx, 50, 1_000_000_000_000, { maxInFlight: 100_000 })

  // The floor's state: one account and one offer, funded far beyond the run.
  const base = fx.keys.base
  await store.hset(`${base}floor:acct:a`, 'confirmed', 1e15, 'held', 0)
  await store.hset(`${base}floor:offer:o`, 'posted', 1e15, 'held', 0, 'burned', 0, 'earned', 0)
  await store.zadd(`${base}floor:ladder`, 50, 'o')
  const script = (lua: string, args: string[]) => {
    const lane = store.lane
    return lane ? lane.run(lua, [base], args) : store.eval(lua, 1, base, ...args)
  }
  const floor = async () => {
    const attemptId = randomUUID()
    if ((await script(floorAdmit, [attemptId, 'a', '1000'])) !== 1) throw new Error('floor admit refused')
    await script(floorClear, [attemptId, '700'])
  }

  const pair = async () => {
    const admitted = await admitFor(fx, accountId, { attemptId: randomUUID() })
    if (admitted.code !== AdmitCode.Admitted) throw new Error(`admit refused: ${JSON.stringify(admitted)}`)
    await clearFor(fx, (admitted as Admission).attemptId, 700)
  }
  // The same client as the pair's scripts: the native lane when the connection has one.
  const trivial = async () => {
    await script('return 1', [])
  }

  // Warm-up: scripts and the function library loaded, connection and JIT warm.
  await rate(job.concurrency, Math.min(0.5, job.seconds), pair)
  await rate(job.concurrency, Math.min(0.5, job.seconds), trivial)
  await rate(job.concurrency, Math.min(0.5, job.seconds), floor)
  const rounds: (LuaPairResult['rounds'][number] & { usPair: number; usTrivial: number; usFloor: number })[] =
    []
  for (let r = 0; r < job.rounds; r++) {
    const t = await measured(store, 1, () => rate(job.concurrency, job.seconds, trivial))
    const p = await measured(store, 2, () => rate(job.concurrency, job.seconds, pair))
    const f = await measured(store, 2, () => rate(job.concurrency, job.seconds, floor))
    rounds.push({
      pairs: p.perSecond,
      trivial: t.perSecond,
      floor: f.perSecond,
      usPair: p.usPerCall,
      usTrivial: t.usPerCall,
      usFloor: f.usPerCall,
    })
  }
  fx.close()
  const pairsPerSecond = median(rounds.map((r) => r.pairs))
  const trivialPerSecond = median(rounds.map((r) => r.trivial))
  return {
    pairsPerSecond,
    trivialPerSecond,
    redisUsPerPair: median(rounds.map((r) => r.usPair)),
    redisUsPerTrivial: median(rounds.map((r) => r.usTrivial)),
    ratio: pairsPerSecond / trivialPerSecond,
    floorPerSecond: median(rounds.map((r) => r.floor)),
    redisUsPerFloor: median(rounds.map((r) => r.usFloor)),
    floorRatio: median(rounds.map((r) => r.floor / r.trivial)),
    rounds: rounds.map(({ pairs, trivial, floor }) => ({ pairs, trivial, floor })),
  }
}

if (import.meta.main) {
  const result = await main(JSON.parse(process.argv[2]!) as Job)
  console.log(`RESULT ${JSON.stringify(result)}`)
  process.exit(0)
}
