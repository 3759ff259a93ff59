// Redis's instructions per admit + clear pair: redis-server run under valgrind's callgrind, the
// market tests' own fixtures driving pairs at it, the counters zeroed after a warm-up and dumped
// after the measured pairs. Instructions, unlike time, do not move with the load of a shared
// machine: an A/B of a Lua change reads in one run of each side, a few thousand instructions apart.
//   bun bench/pair-instructions.ts [pairs=500] [apart|busy|small] [digest] [more=N]   (needs valgrind, redis-server, redis-cli)
// With `apart`, the pair is the two-phase steps (src/market/two-phase.ts: reserve, hold, clear,
// the post queued and carried on the offer's next reservation), their owners' keys on the one
// server.
// With more=N, N more offers at the same ask stand on the ladder behind the one every pair takes:
// what a request costs when the ladder is long.
// With `small` (and more=N), the N offers stand ahead of it instead, at a cent less, each with just the
// market's minimum capacity (10,000 micro-DIEM), and each request holds 100,000: what a prober's
// offers too small for a larger request cost it.
// With `busy`, every offer (the one and the N more) stands at its in-flight cap, and what is
// measured is an admit refused as busy: what a buyer asking again in a full market costs.
// With `digest`, each pair names its key by the key's digest, as a replica's first request of a key
// does (admit reads the key's record; held apart, the hold checks the digest against the account's
// keys); without it, by its account and key ids, as every later one does (src/market/key-owners.ts).
// With CALLGRIND_OUT=<file> the measured dump is kept there, for callgrind_annotate.
import { randomUUID } from 'node:crypto'
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Admission } from '../src/market/admission.ts'
import { reapExpired } from '../src/market/leases.ts'
import type { PostQueue } from '../src/market/post-queue.ts'
import type { MicroDiem } from '../src/money/units.ts'
import { freePort } from '../src/redis/local-server.ts'
import { AdmitCode } from '../src/redis/result-codes.ts'

const pairs = Number(process.argv[2] ?? 500)
const apart = process.argv.slice(3).includes('apart')
const busy = process.argv.slice(3).includes('busy')
const byDigest = process.argv.slice(3).includes('digest')
const small = process.argv.slice(3).includes('small')
const MIN_ROUTABLE = 10_000
const more = Number(process.argv.find((arg) => arg.startsWith('more='))?.slice(5) ?? 0)
const WARM_PAIRS = 300
const CONCURRENCY = 8

const dir = mkdtempSync(join(tmpdir(), 'svc-callgrind-'))
const port = freePort()
const redis = Bun.spawn(
  [
    'valgrind',
    '--tool=callgrind',
    `--callgrind-out-file=${join(dir, 'out.%p')}`,
    'redis-server',
    '--port',
    String(port),
    '--save',
    '',
    '--appendonly',
    'no',
  ],
  { stdout: 'ignore', stderr: 'ignore' },
)
const cli = (...args: string[]) =>
  Bun.spawnSync(['redis-cli', '-p', String(port), ...args])
    .stdout.toString()
    .trim()
const callgrind = (...args: string[]) => Bun.spawnSync(['callgrind_control', ...args, String(redis.pid)])

try {
  for (let i = 0; cli('ping') !== 'PONG'; i++) {
    if (i > 200) throw new Error('redis-server under valgrind did not answer')
    await Bun.sleep(100)
  }
  // The fixtures read TEST_REDIS_URL when first used.
  process.env.TEST_REDIS_URL = `redis://127.0.0.1:${port}`
  const { admitFor, clearFor, marketFixture, postOffer, seedAccount } = await import(
    '../test/helpers/market.ts'
  )
  const fx = marketFixture()
  const accountId = await seedAccount(fx, 1_000_000_000_000)
  const offerId = await postOffer(fx, 50, 1_000_000_000_000, { maxInFlight: 100_000 })
  // Posted after it at the same ask, so behind it on the ladder: never taken. With `small`, cheaper
  // but too small for the request's hold: read or skipped, never taken.
  if (small) await fx.store.hset(fx.keys.market, 'minRoutable', MIN_ROUTABLE)
  for (let i = 0; i < more; i++)
    if (small) await postOffer(fx, 49, MIN_ROUTABLE, { maxInFlight: 100_000 })
    else await postOffer(fx, 50, 1_000_000_000_000, { maxInFlight: 100_000 })
  // As a replica's start and its reaper's first pass leave the market: a build keeping capacity
  // tiers walks them from then on (lua/lib/ladder.lua sweep_tiers); to one keeping none, nothing.
  await fx.store.hset(fx.keys.market, 'tierSwept', '-inf')
  await reapExpired(fx.store, fx.keys)
  const hold = small ? { holdDiem: (10 * MIN_ROUTABLE) as MicroDiem } : {}
  // The fixture account's key (admitRequest's key-1), as minting records it.
  const digest = randomUUID().replaceAll('-', '').repeat(2)
  await fx.store.hset(fx.keys.apiKey(digest), { id: 'key-1', accountId, name: 'bench', createdAt: 1 })
  const named = byDigest ? { accountId: '', apiKeyId: '', apiKeyDigest: digest } : {}
  let posts: PostQueue | undefined
  let pair = async () => {
    const admitted = await admitFor(fx, accountId, { attemptId: randomUUID(), ...named, ...hold })
    if (admitted.code !== AdmitCode.Admitted) throw new Error(`admit refused: ${JSON.stringify(admitted)}`)
    await clearFor(fx, (admitted as Admission).attemptId, 700)
  }
  if (busy) {
    // Each offer's one slot taken by an admit left open.
    for (const id of await fx.store.zrange(fx.keys.ladder, 0, -1))
      await fx.store.hset(fx.keys.offer(id), 'maxInFlight', 1)
    for (let i = 0; i <= more; i++) {
      const taken = await admitFor(fx, accountId, { attemptId: randomUUID() })
      if (taken.code !== AdmitCode.Admitted) throw new Error(`admit refused: ${JSON.stringify(taken)}`)
    }
    pair = async () => {
      const refused = await admitFor(fx, accountId, { attemptId: randomUUID() })
      if (refused.code !== AdmitCode.KeysBusy) throw new Error(`not refused busy: ${JSON.stringify(refused)}`)
    }
  }
  if (apart) {
    // The same account and offer, moved under their owners' tags.
    const { admitApart, clearApart, ownerKeyspaces } = await import('../src/market/two-phase.ts')
    const { PostQueue: Queue } = await import('../src/market/post-queue.ts')
    const { admitRequest, meteredClear } = await import('../test/helpers/market.ts')
    const owners = ownerKeyspaces(fx.keys.prefix)
    // As a replica queues them: each clear's post rides the offer's next reservation.
    const queue = new Queue(fx.store, (id) => owners.offer(id).base)
    posts = queue
    await fx.store.copy(fx.keys.account(accountId), owners.account(accountId).account(accountId))
    await fx.store.copy(fx.keys.offer(offerId), owners.offer(offerId).offer(offerId))
    await fx.store.hset(owners.account(accountId).accountKeys(accountId), 'key-1', digest)
    pair = async () => {
      const admitted = await admitApart(
        fx.store,
        owners,
        { ...admitRequest(accountId), offerId, maxCents: 50, ...(byDigest ? { apiKeyDigest: digest } : {}) },
        queue,
      )
      if (admitted.code !== AdmitCode.Admitted) throw new Error(`admit refused: ${JSON.stringify(admitted)}`)
      const who = { accountId, offerId, model: 'llama-3.3-70b' }
      await clearApart(fx.store, owners, who, meteredClear(admitted.attemptId, 700), queue)
    }
  }
  for (let i = 0; i < WARM_PAIRS; i++) await pair()
  callgrind('--zero')
  let started = 0
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (started < pairs) {
        started++
        await pair()
      }
    }),
  )
  await posts?.flush()
  callgrind('--dump=measured')
  fx.close()
  const dump = readdirSync(dir).find((name) => /^out\.\d+\.\d+$/.test(name))
  if (!dump) throw new Error('callgrind wrote no dump')
  if (process.env.CALLGRIND_OUT) copyFileSync(join(dir, dump), process.env.CALLGRIND_OUT)
  const total = Number(/^summary: (\d+)$/m.exec(readFileSync(join(dir, dump), 'utf8'))?.[1])
  const what = busy ? 'busy refusal' : apart ? 'reserve + hold, clear + post' : 'admit + clear'
  const behind =
    (more
      ? `, ${more} more offers ${busy ? 'at their cap' : small ? 'cheaper, at the minimum' : 'on the ladder'}`
      : '') + (byDigest ? ', the key named by its digest' : '')
  console.log(
    `${Math.round(total / pairs)} Redis instructions per ${what}${busy ? '' : ' pair'} (${pairs}${busy ? '' : ' pairs'}${behind})`,
  )
} finally {
  cli('shutdown', 'nosave')
  await Promise.race([redis.exited, Bun.sleep(5_000)])
  redis.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
}
