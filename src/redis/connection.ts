import Redis from 'ioredis'
import { registerScripts } from './scripts.ts'

export interface RedisOptions {
  /** Shown in CLIENT LIST, to tell replicas and roles apart. */
  name?: string
}

/** The one way the project opens Redis: scripts registered, commands pipelined automatically. */
export function createRedis(url: string, options: RedisOptions = {}): Redis {
  const redis = new Redis(url, {
    connectionName: options.name ?? 'svc-gateway',
    enableAutoPipelining: true,
    maxRetriesPerRequest: 2,
    // Fail fast while disconnected rather than queueing requests behind a dead connection.
    enableOfflineQueue: true,
    lazyConnect: false,
  })
  registerScripts(redis)
  return redis
}
