// `svc-gateway` with only the environment given: run in this process (runCli), or as a child
// process from source (spawnCli). In-process, a command is the same code the binary runs
// (src/cli/run.ts) with its environment, stdout, stderr and exit code swapped in for the call,
// which spares the second or so of CPU a process spends loading the gateway; spawnCli keeps one
// real process start under test.
import { onTestFinished } from 'bun:test'
import { join } from 'node:path'
import { format } from 'node:util'
import { runCommand } from '../../src/cli/run.ts'

const main = join(import.meta.dir, '../../src/main.ts')

export interface CliResult {
  stdout: string
  stderr: string
  code: number
}

// Commands swap process-wide state (the environment, the console): one at a time, each for no longer
// than its test. A command still running when its test ends (timed out) gives the process back then,
// so no later test, nor a later file in the same worker, waits on it or runs in its environment.
let running: Promise<unknown> = Promise.resolve()

/** Runs a command in this process: inside a test or a hook, or in a script of its own (the soak). */
export function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const ended = Promise.withResolvers<void>()
  try {
    onTestFinished(() => ended.resolve())
  } catch {
    // Outside the test runner there is no test to end: the command's own end gives the process back.
  }
  const result = running.then(() => runInProcess(args, env, ended.promise))
  running = Promise.race([result.catch(() => {}), ended.promise])
  return result
}

async function runInProcess(
  args: string[],
  env: Record<string, string>,
  ended: Promise<void>,
): Promise<CliResult> {
  let stdout = ''
  let stderr = ''
  const saved = {
    env: process.env,
    exitCode: process.exitCode,
    log: console.log,
    error: console.error,
    write: process.stdout.write,
  }
  const swapped = { PATH: saved.env.PATH, ...env }
  const restore = () => {
    // Once: the test's end and the command's may both come, in either order.
    if (process.env !== swapped) return
    process.env = saved.env
    process.exitCode = saved.exitCode
    console.log = saved.log
    console.error = saved.error
    process.stdout.write = saved.write
  }
  process.env = swapped
  process.exitCode = 0
  console.log = (...data: unknown[]) => {
    stdout += `${format(...data)}\n`
  }
  console.error = (...data: unknown[]) => {
    stderr += `${format(...data)}\n`
  }
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    stdout += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString()
    const done = rest.find((r) => typeof r === 'function') as ((error?: Error) => void) | undefined
    done?.()
    return true
  }) as typeof process.stdout.write
  void ended.then(restore)
  try {
    await runCommand(args)
    return { stdout, stderr, code: Number(process.exitCode ?? 0) }
  } finally {
    restore()
  }
}

/** The CLI as a real child process from source. */
export async function spawnCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const child = Bun.spawn([process.execPath, main, ...args], {
    env: { PATH: process.env.PATH, ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ])
  return { stdout, stderr, code }
}
