import Redis, { Cluster, type RedisOptions as IORedisOptions } from 'ioredis'
import { ScriptLane } from './script-lane.ts'
import { attachScriptLane, registerScripts } from './scripts.ts'
import { parseRedisTarget } from './target.ts'

export interface RedisOptions {
  /** Shown in CLIENT LIST, to tell replicas and roles apart. */
  name?: string
  /**
   * Serving connections fail fast while Redis is unreachable (a 503 at once) rather than queue
   * requests behind a dead connection; commands and tools keep the queue so they can start first
   * and connect after.
   */
  failFast?: boolean
  /** Where connection errors go (ioredis reconnects by itself; this only reports). */
  onError?: (error: Error) => void
  /**
   * How scripts run on a single Redis: `functions` (the default) as FCALLs on the native lane,
   * `scripts` as EVALSHA through ioredis, the form Sentinel and Cluster always use.
   */
  scriptForm?: ScriptForm
}

export type ScriptForm = 'functions' | 'scripts'

/**
 * The one way the project opens Redis: scripts registered, commands pipelined automatically, and
 * on a single Redis a native lane for the scripts (script-lane.ts).
 */
export function createRedis(url: string, options: RedisOptions = {}): Redis {
  const common: IORedisOptions = {
    connectionName: options.name ?? 'svc-gateway',
    maxRetriesPerRequest: options.failFast ? 0 : 2,
    enableOfflineQueue: !options.failFast,
    lazyConnect: false,
    // While Redis loads its data set, ioredis checks again after the load's estimated time (up to
    // 10 s): the scripts wait for it too (readyScriptLane), so it looks again four times a second.
    maxLoadingRetryTime: 250,
  }
  const target = parseRedisTarget(url)
  let redis: Redis
  let lane: ScriptLane | null = null
  if (target.kind === 'single') {
    redis = new Redis(url, { ...common, enableAutoPipelining: true })
    if (options.scriptForm !== 'scripts') lane = nativeLane(url, `${common.connectionName}-scripts`)
  } else if (target.kind === 'sentinel') {
    redis = new Redis({
      ...common,
      enableAutoPipelining: true,
      sentinels: target.nodes,
      name: target.name,
      password: target.password,
      ...(target.tls ? { tls: {} } : {}),
    })
  } else {
    // A Cluster client speaks the same commands; the project types it as the single-node client.
    redis = new Cluster(target.nodes, {
      enableAutoPipelining: true,
      enableOfflineQueue: common.enableOfflineQueue,
      redisOptions: { ...common, password: target.password, ...(target.tls ? { tls: {} } : {}) },
    }) as unknown as Redis
  }
  // Without a listener ioredis prints "Unhandled error event" on every failed reconnect.
  redis.on('error', options.onError ?? (() => {}))
  registerScripts(redis)
  if (lane) attachScriptLane(redis, lane)
  return redis
}

/**
 * A native lane for a redis://, rediss:// or redis+unix:// URL (what both clients read alike); null,
 * ioredis alone, for anything else (a bare socket path, ioredis's own forms).
 */
function nativeLane(url: string, name: string): ScriptLane | null {
  if (!/^(rediss?|redis\+unix):\/\//.test(url)) return null
  try {
    return new ScriptLane(url, name)
  } catch {
    return null
  }
}

/** Resolves once the connection is ready, or rejects after `ms` (a gateway must not serve before). */
export function whenReady(redis: Redis, ms: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve()
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', ready)
      reject(new Error(`redis not ready after ${ms} ms (${redis.status})`))
    }, ms)
    function ready() {
      clearTimeout(timer)
      resolve()
    }
    redis.once('ready', ready)
  })
}

/** Every master of a Cluster client, or the one connection itself (for SCAN, which is per node). */
export async function masters(redis: Redis): Promise<Redis[]> {
  const client = redis as unknown
  if (!(client instanceof Cluster)) return [redis]
  // A fresh Cluster client knows no node until its first slots refresh: asked sooner, it lists
  // none, and a SCAN over that list walks nothing and finds nothing wrong.
  await whenReady(redis, 15_000)
  return client.nodes('master') as Redis[]
}

/**
 * True for the errors Redis being unreachable gives, as opposed to a script's own errors. Read from
 * codes and messages only: the compiled binary is minified, so a class's name is not its source
 * name there (ioredis' MaxRetriesPerRequestError takes its name from its constructor).
 */
export function isRedisUnavailable(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null
  if (!e || typeof e !== 'object') return false
  const code = typeof e.code === 'string' ? e.code : ''
  const message = typeof e.message === 'string' ? e.message : ''
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EPIPE' || code === 'ETIMEDOUT')
    return true
  // Bun's native client (the script lane): a connection closed, not open yet, or timed out.
  if (code.startsWith('ERR_REDIS_CONNECTION')) return true
  return STORE_AWAY.test(message)
}

/**
 * ioredis with no offline queue or out of retries; a connection that ended; and the replies of a
 * Redis that runs no command yet (loading its data set, a master or cluster not serving), which
 * refuse the command before it runs.
 */
const STORE_AWAY =
  /enableOfflineQueue|Connection is closed|Stream isn't writeable|max retries per request|^(LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN)\b/i
