// Redis's work while the gateway replicas are idle: N replicas of the gateway on one Redis with no
// requests, and the Redis CPU and commands they cost per second (the background work: reaper,
// renewals, catalog sync, webhook delivery, payouts, replica heartbeats).
//   bun bench/idle-replicas.ts [replicas=1,4,8] [seconds=10]
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import { freePort, startLocalRedis } from '../src/redis/local-server.ts'
import { serverCpu } from '../src/redis/server-cpu.ts'

const counts = (process.argv[2] ?? '1,4,8').split(',').map(Number)
const seconds = Number(process.argv[3] ?? 10)
const main = new URL('../src/main.ts', import.meta.url).pathname

const server = await startLocalRedis()
const direct = new Redis(server.url)
const cpu = async () => (await serverCpu([server.port]))[0]!.all
try {
  for (const n of counts) {
    const prefix = `idle:{i${randomBytes(4).toString('hex')}}`
    const procs = Array.from({ length: n }, () => {
      const port = freePort()
      return Bun.spawn([process.execPath, main, 'serve'], {
        env: {
          ...process.env,
          PORT: String(port),
          HOST: '127.0.0.1',
          REDIS_URL: server.url,
          SVC_REDIS_PREFIX: prefix,
          SVC_ADMIN_TOKEN: randomBytes(16).toString('hex'),
          SVC_MASTER_KEY: randomBytes(32).toString('hex'),
          SVC_UPSTREAM_URL: 'http://127.0.0.1:9',
          LOG_LEVEL: 'error',
        },
        stdout: 'ignore',
        stderr: 'ignore',
      })
    })
    await Bun.sleep(5000)
    await direct.config('RESETSTAT')
    const before = await cpu()
    await Bun.sleep(seconds * 1000)
    const spent = (await cpu()) - before
    const stats = await direct.info('commandstats')
    const top = [...stats.matchAll(/cmdstat_([^:]+):calls=(\d+)/g)]
      .map(([, name, calls]) => [name, Number(calls) / seconds] as const)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([name, perSecond]) => `${name} ${perSecond.toFixed(1)}/s`)
    console.log(
      `${n} idle replicas: Redis CPU ${((spent * 1000) / seconds).toFixed(2)} ms/s; ${top.join(', ')}`,
    )
    for (const p of procs) p.kill()
    await Promise.all(procs.map((p) => p.exited))
  }
} finally {
  direct.disconnect()
  await server.stop()
}
