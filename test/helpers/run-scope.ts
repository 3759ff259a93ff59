// One service for a whole `bun test --parallel` run, shared by its workers. Each worker runs each
// file in a fresh global scope, so nothing started in one file outlives it; a keeper process does.
// The first worker to ask starts the keeper (a lock file decides which); the keeper writes where its
// service answers and stops it once the run's coordinator (every worker's parent) has exited.
import { spawn } from 'node:child_process'
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs'
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
