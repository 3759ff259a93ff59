// Redis's instructions per admit + clear pair: redis-server run under valgrind's callgrind, the
// market tests' own fixtures driving pairs at it, the counters zeroed after a warm-up and dumped
// after the measured pairs. Instructions, unlike time, do not move with the load of a shared
// machine: an A/B of a Lua change reads in one run of each side, a few thousand instructions apart.
//   bun bench/pair-instructions.ts [pairs=500]   (needs valgrind, redis-server, redis-cli)
// With CALLGRIND_OUT=<file> the measured dump is kept there, for callgrind_annotate.
import { randomUUID } from 'node:crypto'
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Admission } from '../src/market/admission.ts'
import { freePort } from '../src/redis/local-server.ts'
import { AdmitCode } from '../src/redis/result-codes.ts'

const pairs = Number(process.argv[2] ?? 500)
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
  await postOffer(fx, 50, 1_000_000_000_000, { maxInFlight: 100_000 })
  const pair = async () => {
    const admitted = await admitFor(fx, accountId, { attemptId: randomUUID() })
    if (admitted.code !== AdmitCode.Admitted) throw new Error(`admit refused: ${JSON.stringify(admitted)}`)
    await clearFor(fx, (admitted as Admission).attemptId, 700)
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
  callgrind('--dump=measured')
  fx.close()
  const dump = readdirSync(dir).find((name) => /^out\.\d+\.\d+$/.test(name))
  if (!dump) throw new Error('callgrind wrote no dump')
  if (process.env.CALLGRIND_OUT) copyFileSync(join(dir, dump), process.env.CALLGRIND_OUT)
  const total = Number(/^summary: (\d+)$/m.exec(readFileSync(join(dir, dump), 'utf8'))?.[1])
  console.log(`${Math.round(total / pairs)} Redis instructions per admit + clear pair (${pairs} pairs)`)
} finally {
  cli('shutdown', 'nosave')
  await Promise.race([redis.exited, Bun.sleep(5_000)])
  redis.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
}
