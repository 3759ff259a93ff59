// `svc-gateway demo` with a bad environment: a clear error, a non-zero exit, and nothing left behind
// (no orphaned redis-server, no temporary folder).
import { expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const main = join(import.meta.dir, '../../src/main.ts')

/** Processes whose working folder is under `dir` (a redis-server runs in its --dir). */
function processesUnder(dir: string): number[] {
  const pids: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (readlinkSync(`/proc/${name}/cwd`).startsWith(dir)) pids.push(Number(name))
    } catch {}
  }
  return pids
}

test('demo with a bad PORT exits 2 naming it and leaves no redis-server nor folder behind', async () => {
  const tmp = mkdtempSync(join(tmpdir(), 'demo-bad-env-'))
  try {
    // stderr to a file: an orphan that inherited a pipe would hold it open forever.
    const log = join(tmpdir(), `demo-bad-env-${process.pid}.log`)
    const child = Bun.spawn([process.execPath, main, 'demo'], {
      env: { PATH: process.env.PATH, PORT: 'abc', TMPDIR: tmp },
      stdout: 'ignore',
      stderr: Bun.file(log),
    })
    expect(await child.exited).toBe(2)
    expect(await Bun.file(log).text()).toContain('config: PORT must be an integer')
    rmSync(log, { force: true })
    const left = processesUnder(tmp)
    for (const pid of left) process.kill(pid, 'SIGKILL')
    expect(left).toEqual([])
    expect(readdirSync(tmp)).toEqual([])
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}, 30_000)
