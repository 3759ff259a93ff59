// Child processes of the benchmark: started with their output in a log file, waited for over HTTP,
// measured by their resident memory, stopped on exit.
import { openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Subprocess } from 'bun'

export interface Service {
  name: string
  pid: number
  proc: Subprocess
  stop(): Promise<void>
}

const running = new Set<Service>()

export function spawnService(
  name: string,
  cmd: string[],
  options: { env?: Record<string, string>; cwd?: string; logDir: string },
): Service {
  const log = openSync(join(options.logDir, `${name}.log`), 'a')
  const proc = Bun.spawn(cmd, {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdout: log,
    stderr: log,
    stdin: 'ignore',
  })
  const service: Service = {
    name,
    pid: proc.pid,
    proc,
    async stop() {
      running.delete(service)
      proc.kill('SIGTERM')
      const exited = await Promise.race([proc.exited.then(() => true), Bun.sleep(3_000).then(() => false)])
      if (!exited) proc.kill('SIGKILL')
    },
  }
  running.add(service)
  return service
}

export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((service) => service.stop()))
}

/** Resolves once `url` answers with any HTTP status; throws after `ms`. */
export async function waitForHttp(service: Service, url: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms
  for (;;) {
    if (service.proc.exitCode !== null) throw new Error(`${service.name} exited (${service.proc.exitCode})`)
    try {
      await fetch(url)
      return
    } catch {
      if (Date.now() > deadline) throw new Error(`${service.name} did not answer at ${url}`)
      await Bun.sleep(50)
    }
  }
}

/** Resident set size of a process, in bytes (Linux /proc). */
export async function rssBytes(pid: number): Promise<number> {
  const status = await Bun.file(`/proc/${pid}/status`).text()
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status)
  if (!match) throw new Error(`no VmRSS for pid ${pid}`)
  return Number(match[1]) * 1024
}

/** stdout of a short command, trimmed; '' when it fails. */
export function commandOutput(cmd: string[]): string {
  try {
    const result = Bun.spawnSync(cmd, { stdout: 'pipe', stderr: 'pipe' })
    return `${result.stdout.toString()}${result.stderr.toString()}`.trim()
  } catch {
    return ''
  }
}

const TICK_MS = 1000 / 100 // USER_HZ

/** A process's /proc stat fields after its name (field 3 of proc(5) first). */
function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

/** CPU time of a process so far, ms (its threads included). */
export function cpuMs(pid: number): number {
  const fields = statFields(pid)
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS
}

/** Page faults a process has taken so far without reading the disk (memory the allocator gave back). */
export function minorFaults(pid: number): number {
  return Number(statFields(pid)[7])
}
