// Cores of their own for sizing's masters: the topology read from a sysfs tree, the plan that keeps
// whole physical cores for Redis, and real processes moved with taskset.
import { afterAll, describe, expect, test } from 'bun:test'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { cpusOf, physicalCores, pinPlan, pinProcess } from '../../src/cli/cpu-pinning.ts'
import { pinServers } from '../../src/cli/sizing.ts'
import { startLocalRedis } from '../../src/redis/local-server.ts'

const trees: string[] = []
afterAll(() => {
  for (const dir of trees) rmSync(dir, { recursive: true, force: true })
})

/** A sysfs cpu folder with `siblings[i]` as cpu i's thread_siblings_list. */
function sysfs(siblings: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-cpus-'))
  trees.push(dir)
  siblings.forEach((list, cpu) => {
    mkdirSync(join(dir, `cpu${cpu}`, 'topology'), { recursive: true })
    writeFileSync(join(dir, `cpu${cpu}`, 'topology', 'thread_siblings_list'), `${list}\n`)
  })
  mkdirSync(join(dir, 'cpufreq'))
  return dir
}

describe('cpu pinning', () => {
  test('hyperthreads group into physical cores; Redis gets whole cores, one CPU of each used', () => {
    // Eight CPUs on four cores, siblings four apart (as Intel numbers them).
    const cores = physicalCores(sysfs(['0,4', '1,5', '2,6', '3,7', '0,4', '1,5', '2,6', '3,7']))
    expect(cores).toEqual([
      [0, 4],
      [1, 5],
      [2, 6],
      [3, 7],
    ])
    const plan = pinPlan(3, cores)
    expect(plan.redis).toEqual([1, 2, 3])
    // Neither a Redis CPU nor its sibling runs anything else.
    expect(plan.rest).toEqual([0, 4])
    expect(() => pinPlan(4, cores)).toThrow(/4 physical cores, and the rest need one/)
  })

  test('without hyperthreads each CPU is a core', () => {
    const plan = pinPlan(1, physicalCores(sysfs(['0', '1', '2'])))
    expect(plan).toEqual({ redis: [2], rest: [0, 1] })
  })

  // A machine of one physical core has none to keep for Redis.
  test.skipIf(physicalCores().length < 2)('a real redis-server moved onto its core, and back', async () => {
    const own = cpusOf(process.pid)
    const plan = pinPlan(1)
    const redis = await startLocalRedis()
    try {
      await pinServers([redis.port], plan)
      const pid = Number(
        Bun.spawnSync(['redis-cli', '-p', String(redis.port), 'info', 'server'])
          .stdout.toString()
          .match(/process_id:(\d+)/)![1],
      )
      expect(cpusOf(pid)).toEqual(plan.redis)
      pinProcess(pid, own)
      expect(cpusOf(pid)).toEqual(own)
    } finally {
      await redis.stop()
    }
  })
})
