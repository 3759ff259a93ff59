// A real redis-server that is loading its data set: the one given is saved and killed, then
// started again on the same port and folder with each key's load slowed down (Redis's own
// `key-load-delay`) and client events served while it loads, so that it answers every command with
// `LOADING Redis is loading the dataset in memory` until the test ends the load (the delay is a
// setting Redis takes while loading): the load lasts as long as the test needs, not a fixed time.
import { join } from 'node:path'
import { RedisClient } from 'bun'
import Redis from 'ioredis'
import type { LocalRedis } from '../../src/redis/local-server.ts'

export interface LoadingRedis {
  /** Ends the load (the delay set to 0) and resolves once the server serves commands again. */
  finish(): Promise<void>
  stop(): Promise<void>
}

/** Keys of padding so the load lasts: `keys` x `delayUs` microseconds in all, unless ended sooner. */
export async function pad(url: string, keys: number): Promise<void> {
  const redis = new Redis(url)
  try {
    const value = 'x'.repeat(200)
    for (let i = 0; i < keys; i += 1_000) {
      const batch = redis.pipeline()
      for (let j = i; j < Math.min(keys, i + 1_000); j++) batch.set(`padding:${j}`, value)
      await batch.exec()
    }
    await redis.save()
  } finally {
    redis.disconnect()
  }
}

export async function restartLoading(server: LocalRedis, delayUs = 5_000): Promise<LoadingRedis> {
  const probe = new Redis(server.url)
  await probe.save()
  probe.disconnect()
  await server.kill()
  const child = Bun.spawn(
    [
      'redis-server',
      '--port',
      String(server.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      server.dir,
      '--save',
      '',
      '--appendonly',
      'no',
      '--unixsocket',
      join(server.dir, 'redis.sock'),
      '--unixsocketperm',
      '700',
      '--key-load-delay',
      String(delayUs),
      '--loading-process-events-interval-bytes',
      '1024',
    ],
    { stdout: 'ignore', stderr: 'inherit' },
  )
  /** The server's answer to one command on a fresh connection, or the error's message. */
  const send = async (command: string, ...args: string[]) => {
    const client = new RedisClient(server.url, { autoReconnect: false, connectionTimeout: 1_000 })
    try {
      await client.connect()
      return String(await client.send(command, args))
    } catch (error) {
      return (error as Error).message
    } finally {
      client.close()
    }
  }
  const reply = () => send('PING')
  for (let i = 0; ; i++) {
    const answer = await reply()
    if (answer.startsWith('LOADING')) break
    if (answer === 'PONG' || i > 200) {
      child.kill('SIGKILL')
      throw new Error(`redis-server did not stay loading (${answer})`)
    }
    await Bun.sleep(20)
  }
  return {
    async finish() {
      // Asked again until it is answered: a busy machine may pass one try's connect timeout.
      for (let i = 0; (await send('CONFIG', 'SET', 'key-load-delay', '0')) !== 'OK'; i++) {
        if (i > 100) throw new Error('redis-server did not take key-load-delay 0')
        await Bun.sleep(50)
      }
      for (let i = 0; i < 1_000; i++) {
        if ((await reply()) === 'PONG') return
        await Bun.sleep(50)
      }
      throw new Error('redis-server never finished loading')
    },
    async stop() {
      child.kill('SIGKILL')
      await child.exited
    },
  }
}
