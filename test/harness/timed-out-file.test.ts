// One file's timeout stays that file's: a parallel worker (--no-isolate) runs many files in one
// process after one preload, so a file that times out with the environment swapped, or with the hook
// that gives the run's Redis back never run, must leave the files after it on the run's Redis.
import { expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { testRedisUrl } from '../helpers/stack.ts'

const ROOT = join(import.meta.dir, '../..')
/** Long enough for a quick test on a busy machine; the hanging fixtures time out whatever it is. */
const FIXTURE_TIMEOUT_MS = 10_000

/**
 * A `bun test` run of `fixtures` in order in one worker: each test's outcome by name, and what it
 * printed.
 */
async function runInOneWorker(
  ...fixtures: string[]
): Promise<{ outcomes: Record<string, string>; output: string }> {
  const env: Record<string, string | undefined> = { ...process.env, REDIS_URL: testRedisUrl() }
  // The run's own choice of Redis and worker, not this one's.
  for (const name of Object.keys(env))
    if (name.startsWith('BUN_TEST_') || name === 'TEST_REDIS_URL') delete env[name]
  // To files, not pipes: a server the run failed to stop would hold a pipe open past the run.
  const dir = mkdtempSync(join(tmpdir(), 'svc-timed-out-'))
  try {
    const [out, err] = [join(dir, 'stdout'), join(dir, 'stderr')]
    const child = Bun.spawn(
      [
        process.execPath,
        'test',
        `--timeout=${FIXTURE_TIMEOUT_MS}`,
        '--parallel=1',
        '--no-isolate',
        ...fixtures.map((name) => `./test/harness/fixtures/${name}.ts`),
      ],
      { cwd: ROOT, env, stdout: Bun.file(out), stderr: Bun.file(err) },
    )
    await child.exited
    const output = `${readFileSync(out, 'utf8')}\n${readFileSync(err, 'utf8')}`
    const outcomes: Record<string, string> = {}
    for (const [, outcome, name] of output.matchAll(/^\((pass|fail)\) (.+?) \[/gm)) outcomes[name!] = outcome!
    return { outcomes, output }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

test('a command that outlives its test leaves later tests and files their environment', async () => {
  const { outcomes } = await runInOneWorker('command-outlives-test', 'later-file')
  expect(outcomes).toEqual({
    'an export that never ends': 'fail',
    'a command after it': 'pass',
    "a later file is on the run's Redis": 'pass',
  })
}, 60_000)

test("a file whose hooks time out leaves later files on the run's Redis, and its server stopped", async () => {
  const { outcomes, output } = await runInOneWorker('hook-outlives-file', 'later-file')
  expect(outcomes).toMatchObject({
    'the file has its own server': 'pass',
    "a later file is on the run's Redis": 'pass',
  })
  // The hook that never ended is the file's one failure.
  expect(Object.values(outcomes).filter((outcome) => outcome === 'fail')).toHaveLength(1)
  const own = new URL(output.match(/own server: (\S+)/)![1]!)
  const refused = Bun.connect({ hostname: own.hostname, port: Number(own.port), socket: { data() {} } })
  await expect(refused).rejects.toThrow()
}, 60_000)
