// One service for a whole `bun test --parallel` run, shared by its workers. Each worker runs each
// file in a fresh global scope, so nothing started in one file outlives it; a keeper process does.
// The first worker to ask starts the keeper (a lock file decides which); the keeper writes where its
// service answers and stops it once the run's coordinator (every worker's parent) has exited.
import { spawn } from 'node:child_process'
import { closeSync, existsSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { until } from './wait.ts'

/** The run's coordinator, when this file runs in a parallel worker: its pid and start time. */
export function parallelRun(): { pid: number; id: string } | null {
  if (!process.env.BUN_TEST_WORKER_ID) return null
  const pid = process.ppid
  // The start time (field 22 of /proc/PID/stat) tells a recycled pid from the run's.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const started = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
  return { pid, id: `${pid}-${started}` }
}

/**
 * What the keeper script `keeper` wrote for this run under `name` (it is started once per run with
 * the coordinator's pid and the file to write), read once it is there.
 */
export async function runScoped<T>(
  name: string,
  keeper: string,
  run: { pid: number; id: string },
): Promise<T> {
  const file = join(tmpdir(), `svc-test-${name}-${run.id}.json`)
  try {
    closeSync(openSync(`${file}.lock`, 'wx'))
    // Through setsid -f: bun test ends a file's subprocesses with the file, detached or not.
    spawn('setsid', ['-f', process.execPath, keeper, String(run.pid), file], { stdio: 'ignore' }).unref()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  await until(() => existsSync(file), 20)
  const written = JSON.parse(readFileSync(file, 'utf8')) as T | { error: string }
  if (written && typeof written === 'object' && 'error' in written) {
    throw new Error(`${name} for this run did not start: ${written.error}`)
  }
  return written as T
}

/**
 * The keeper's side: starts the service, writes what `runScoped` reads to `file`, and stops it
 * once the coordinator `pid` has exited. Usage of a keeper script: <coordinator pid> <file>.
 */
export async function keepForRun(start: () => Promise<{ value: unknown; stop(): Promise<void> }>) {
  const [coordinator, file] = [Number(process.argv[2]), process.argv[3]!]
  const write = (value: unknown) => {
    writeFileSync(`${file}.tmp`, JSON.stringify(value))
    renameSync(`${file}.tmp`, file)
  }
  try {
    const service = await start()
    write(service.value)
    const watch = setInterval(async () => {
      if (alive(coordinator)) return
      clearInterval(watch)
      await service.stop().catch(() => {})
      for (const path of [file, `${file}.lock`]) rmSync(path, { force: true })
      process.exit(0)
    }, 500)
  } catch (error) {
    write({ error: String(error) })
    process.exit(1)
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
