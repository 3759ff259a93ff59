// The compiled binary serves with its allocator's hole purging off (src/cli/allocator.ts): the
// process runs itself again in place, so the pid its supervisor started is the one serving, with
// the option in its environment; an operator's own value is kept.
import { afterAll, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { type Cluster, startCluster } from '../../chaos/cluster.ts'
import { freePort, startLocalRedis } from '../../src/redis/local-server.ts'
import { startSim } from '../../src/sim/server.ts'
import { compiledBinary } from '../helpers/binary.ts'
import { until } from '../helpers/wait.ts'

const binary = await compiledBinary()
const redis = await startLocalRedis()
const sim = startSim({ port: 0 })
const clusters: Cluster[] = []
afterAll(async () => {
  for (const cluster of clusters) await cluster.stop()
  await sim.stop()
  await redis.stop()
})

/** The allocator option in a process's environment, as the kernel has it (null when unset). */
function purgeHoles(pid: number): string | null {
  const entry = readFileSync(`/proc/${pid}/environ`, 'utf8')
    .split('\0')
    .find((line) => line.startsWith('MIMALLOC_PURGE_HOLES='))
  return entry === undefined ? null : entry.slice('MIMALLOC_PURGE_HOLES='.length)
}

async function serving(env: Record<string, string> = {}) {
  const cluster = await startCluster({
    redisUrl: redis.url,
    sim,
    replicas: 1,
    command: [binary, 'serve'],
    env,
  })
  clusters.push(cluster)
  return cluster.replicas[0]!
}

test('serve runs with hole purging off, in the process that was started', async () => {
  const replica = await serving()
  expect(purgeHoles(replica.child.pid)).toBe('0')
  expect((await fetch(`${replica.url}/readyz`)).status).toBe(200)
  expect(replica.child.exitCode).toBeNull()
})

test("an operator's own MIMALLOC_PURGE_HOLES is kept", async () => {
  const replica = await serving({ MIMALLOC_PURGE_HOLES: '1' })
  expect(purgeHoles(replica.child.pid)).toBe('1')
  expect((await fetch(`${replica.url}/readyz`)).status).toBe(200)
})

test('a command that is not the gateway (the simulated supplier) runs as it was started', async () => {
  const port = freePort()
  const child = Bun.spawn([binary, 'sim'], {
    env: { PATH: process.env.PATH ?? '', SIM_PORT: String(port), SIM_HOST: '127.0.0.1' },
    stdout: 'ignore',
  })
  try {
    await until(async () => (await fetch(`http://127.0.0.1:${port}/models`).catch(() => null))?.ok === true)
    expect(purgeHoles(child.pid)).toBeNull()
  } finally {
    child.kill()
    await child.exited
  }
})
