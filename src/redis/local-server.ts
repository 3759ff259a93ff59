// A throwaway redis-server on a free port in a temporary folder: what `demo` and the test harness
// run when no REDIS_URL is given. Nothing here is used by `serve`. It listens on loopback TCP and on
// a Unix socket in its folder, which spares a gateway on the same machine the TCP stack.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Redis from 'ioredis'

export interface LocalRedis {
  url: string
  /** The same server over its Unix socket (`redis+unix:///.../redis.sock`). */
  socketUrl: string
  port: number
  dir: string
  stop(): Promise<void>
  /** kill -9, keeping its folder (and any AOF in it) for a restart there. */
  kill(): Promise<void>
}

export function freePort(): number {
  const listener = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = listener.port
  listener.stop(true)
  return port
}

async function waitForPing(url: string, deadline: number): Promise<void> {
  for (;;) {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
    probe.on('error', () => {})
    try {
      await probe.connect()
      await probe.ping()
      return
    } catch (error) {
      if (Date.now() > deadline)
        throw new Error(`redis-server did not answer at ${url}: ${(error as Error).message}`)
      await Bun.sleep(25)
    } finally {
      probe.disconnect()
    }
  }
}

/** `port` and `dir`: to bring a stopped one back where its clients expect it, on its own files. */
export async function startLocalRedis(
  extraArgs: string[] = [],
  port = freePort(),
  dir = mkdtempSync(join(tmpdir(), 'svc-redis-')),
): Promise<LocalRedis> {
  if (!Bun.which('redis-server')) {
    throw new Error('redis-server is not installed (Debian: apt-get install redis-server), or set REDIS_URL')
  }
  const child = Bun.spawn(
    [
      'redis-server',
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'no',
      '--unixsocket',
      join(dir, 'redis.sock'),
      '--unixsocketperm',
      '700',
      ...extraArgs,
    ],
    { stdout: 'ignore', stderr: 'inherit' },
  )
  const url = `redis://127.0.0.1:${port}`
  try {
    await waitForPing(url, Date.now() + 10_000)
  } catch (error) {
    child.kill('SIGKILL')
    throw error
  }
  return {
    url,
    socketUrl: `redis+unix://${join(dir, 'redis.sock')}`,
    port,
    dir,
    async stop() {
      child.kill('SIGTERM')
      await child.exited
      rmSync(dir, { recursive: true, force: true })
    },
    async kill() {
      child.kill('SIGKILL')
      await child.exited
    },
  }
}
