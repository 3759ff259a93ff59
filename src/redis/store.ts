// The store: one object that owns the project's connections to Redis and both forms its scripts
// run in. ioredis carries reads and plain commands (and Sentinel and Cluster, which Bun's client does
// not speak); on a single Redis a native lane (script-lane.ts) carries the scripts as FCALLs. The
// two are one store: the lane serves only while ioredis is ready too, so after a restart or a data
// set load scripts and reads come back together, and close() ends both.

import Redis, { Cluster, type RedisOptions as IORedisOptions } from 'ioredis'
import { ClusterFunctions } from './cluster-functions.ts'
import { ClusterLane, masterName, PASSED, slotMaster } from './cluster-lane.ts'
import { storeClosed } from './connection.ts'
import { clusterReplicaWait, type ReplicaWait, serverReplicaWait } from './replica-wait.ts'
import { ScriptLane } from './script-lane.ts'
import { CLUSTER_LIBRARY, LIBRARY, SCRIPTS, type ScriptName } from './script-registry.ts'
import { parseRedisTarget } from './target.ts'

/**
 * The commands the project sends, by name. Both a single Redis and a Cluster client have each of
 * them (commandsOf below takes either): the store hands them to the connection it owns.
 */
const COMMANDS = [
  'call',
  'copy',
  'client',
  'config',
  'del',
  'dumpBuffer',
  'eval',
  'exists',
  'flushdb',
  'get',
  'hdel',
  'hexists',
  'hget',
  'hgetall',
  'hincrby',
  'hkeys',
  'hlen',
  'hmget',
  'hset',
  'hsetnx',
  'hvals',
  'info',
  'keys',
  'lrange',
  'mget',
  'multi',
  'pipeline',
  'ping',
  'pexpire',
  'pttl',
  'restore',
  'sadd',
  'scan',
  'scard',
  'script',
  'set',
  'sismember',
  'smembers',
  'srem',
  'time',
  'ttl',
  'type',
  'xack',
  'xadd',
  'xautoclaim',
  'xclaim',
  'xgroup',
  'xinfo',
  'xlen',
  'xpending',
  'xrange',
  'xreadgroup',
  'xrevrange',
  'xtrim',
  'zadd',
  'zcard',
  'zrange',
  'zrangebyscore',
  'zrem',
  'zrevrange',
  'zrevrank',
  'zmscore',
  'zscore',
] as const

/** The commands of one Redis server or of a whole Cluster, as the project sends them. */
export type Commands = Pick<Redis, (typeof COMMANDS)[number]>

type ScriptArg = string | number

export interface Store extends Commands {
  /** Runs a registered script with its KEYS and ARGV in order (runScript in scripts.ts names them). */
  sendScript(name: ScriptName, keys: string[], argv: ScriptArg[]): Promise<unknown>
  /** True while the command connection is ready. */
  readonly ready: boolean
  /** The native lane while it and the command connection are both up, else undefined. */
  readonly lane: ScriptLane | undefined
  /** Resolves once the store is ready, or rejects after `ms` (a gateway must not serve before). */
  whenReady(ms: number): Promise<void>
  /** Every master of a Cluster, or the one server itself (for SCAN and FUNCTION, which are per node). */
  masters(): Promise<Commands[]>
  /** The master serving `key`'s slot as the client knows it now ("host:port"); undefined off a Cluster. */
  masterOf(key: string): string | undefined
  /**
   * Waits until `replicas` replicas of every master (or of those named, "host:port", on a
   * Cluster) have what it acknowledged before the call, or `ms` pass (replica-wait.ts); how many had
   * it, per master waited on.
   */
  waitReplicas(replicas: number, ms: number, masters?: readonly string[]): Promise<number[]>
  /**
   * Ends every connection the store opened, for good: a command in flight fails as on a lost
   * connection, and a script sent after fails at once with storeClosed (connection.ts).
   */
  close(): void
}

export interface StoreOptions {
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
   * Called when a connection to a Redis server that was ready closes (a restart, a master's
   * failover, a network cut): what that server acknowledged last may not have reached its
   * replicas or its disk. On a Cluster, `master` names the server ("host:port", as masterOf does).
   */
  onLost?: (master?: string) => void
  /**
   * How scripts run: `functions` (the default) as FCALLs on the native lane (on a Cluster, a lane
   * to each master), `scripts` through ioredis alone: EVALSHA on a single Redis, the form Sentinel
   * always uses, and on a Cluster FCALLs that ioredis routes.
   */
  scriptForm?: ScriptForm
}

export type ScriptForm = 'functions' | 'scripts'

/**
 * The masters ("host:port") serving the slots of `keys`, each once; none when the store cannot say
 * for one of them (off a Cluster, or a slot the client does not know yet): then every master.
 */
export function mastersOf(store: Pick<Store, 'masterOf'>, keys: readonly string[]): string[] {
  const masters: string[] = []
  for (const key of keys) {
    const master = store.masterOf(key)
    if (master === undefined) return []
    if (!masters.includes(master)) masters.push(master)
  }
  return masters
}

/** How many times in a row a command's store reconnects to a Cluster: about 5 s of ioredis's own waits. */
export const CLUSTER_RECONNECTS = 40

function reconnectWhileBounded(times: number): number | null {
  return times > CLUSTER_RECONNECTS ? null : Math.min(100 + times * 2, 2000)
}

/** The one way the project opens Redis: a single server, a Sentinel group or a Cluster by its URL. */
export function createStore(url: string, options: StoreOptions = {}): Store {
  const common: IORedisOptions = {
    connectionName: options.name ?? 'svc-gateway',
    maxRetriesPerRequest: options.failFast ? 0 : 2,
    enableOfflineQueue: !options.failFast,
    lazyConnect: false,
    // While Redis loads its data set, ioredis checks again after the load's estimated time (up to
    // 10 s): the lane waits for it too (the store's `lane`), so it looks again four times a second.
    maxLoadingRetryTime: 250,
  }
  const target = parseRedisTarget(url)
  if (target.kind === 'cluster') {
    const { lazyConnect: _, ...nodeOptions } = common
    const cluster = new Cluster(target.nodes, {
      // Not on a Cluster: ioredis follows a redirection of an autopipelined batch only when every
      // command of it got the same one, and then sends the whole batch on, so while a slot moves
      // a write's ASK came back to the caller as its error and a read of a key still on the
      // source was asked of the target, which answered it missing (RELIABILITY.md, slot moves).
      enableAutoPipelining: false,
      enableOfflineQueue: common.enableOfflineQueue,
      // A command's store queues what it sends while the Cluster is down, and ioredis keeps a
      // Cluster's queue for as long as it reconnects (a single server's command fails after
      // maxRetriesPerRequest): past a bounded number of tries it ends, failing what it queued,
      // so an operator command against a Cluster that is down fails rather than waits forever.
      ...(options.failFast ? {} : { clusterRetryStrategy: reconnectWhileBounded }),
      // Its nodes connect on their first command (ioredis's own default): one connecting when the
      // Cluster's ready check is sent to it refuses that check while the offline queue is off, and
      // the Cluster reconnects from scratch; on a busy host that went on for longer than a start waits.
      redisOptions: { ...nodeOptions, password: target.password, ...(target.tls ? { tls: {} } : {}) },
    })
    // Without a listener ioredis prints "Unhandled error event" on every failed reconnect.
    cluster.on('error', options.onError ?? (() => {}))
    const onLost = options.onLost
    if (onLost) cluster.on('+node', (node: Redis) => watchLoss(node, () => onLost(masterName(node))))
    const lane =
      options.scriptForm === 'scripts'
        ? null
        : new ClusterLane(cluster, CLUSTER_LIBRARY, {
            name: `${common.connectionName}-scripts`,
            tls: target.tls,
            password: target.password,
          })
    return clusterStore(cluster, lane, clusterReplicaWait(cluster, `${common.connectionName}-replicas`))
  }
  if (target.kind === 'sentinel') {
    const redis = new Redis({
      ...common,
      enableAutoPipelining: true,
      sentinels: target.nodes,
      name: target.name,
      password: target.password,
      ...(target.tls ? { tls: {} } : {}),
    })
    redis.on('error', options.onError ?? (() => {}))
    if (options.onLost) watchLoss(redis, () => options.onLost?.())
    return singleStore(redis, null, serverReplicaWait(redis, `${common.connectionName}-replicas`))
  }
  const redis = new Redis(url, { ...common, enableAutoPipelining: true })
  redis.on('error', options.onError ?? (() => {}))
  if (options.onLost) watchLoss(redis, () => options.onLost?.())
  const lane = options.scriptForm === 'scripts' ? null : nativeLane(url, `${common.connectionName}-scripts`)
  return singleStore(redis, lane, serverReplicaWait(redis, `${common.connectionName}-replicas`))
}

/** Calls `onLost` once each time the connection closes after being ready (a failed reconnect is not another loss). */
function watchLoss(redis: Redis, onLost: () => void): void {
  let ready = redis.status === 'ready'
  redis.on('ready', () => {
    ready = true
  })
  redis.on('close', () => {
    if (!ready) return
    ready = false
    onLost()
  })
}

/** A single server (or a Sentinel's master): scripts on the lane while it is up, else EVALSHA. */
function singleStore(redis: Redis, lane: ScriptLane | null, replicaWait: ReplicaWait): Store {
  const evalsha = registerScripts(redis, 'lua')
  const ready = () => redis.status === 'ready'
  // One readiness for both: after a restart or a data set load, ioredis turns ready only once its
  // own check finds Redis loaded, while the lane's socket is open all along; a lane that served
  // scripts sooner had a replica serve paid requests while its account reads still answered 503.
  const readyLane = () => (lane?.ready && ready() ? lane : undefined)
  let closed = false
  return {
    ...commandsOf(redis),
    sendScript(name, keys, argv) {
      if (closed) return Promise.reject(storeClosed())
      const onLane = readyLane()
      if (onLane) return onLane.call(LIBRARY, name, SCRIPTS[name].lua, keys, argv)
      return evalsha(name, keys, argv)
    },
    get ready() {
      return ready()
    },
    get lane() {
      return readyLane()
    },
    whenReady: (ms) => untilReady(redis, ms),
    masters: async () => [redis],
    masterOf: () => undefined,
    waitReplicas: (replicas, ms) => replicaWait.wait(replicas, ms),
    close() {
      closed = true
      lane?.close()
      replicaWait.close()
      redis.disconnect()
    },
  }
}

/**
 * A Cluster: scripts as FCALLs on the native lane to their slot's master, through ioredis (which
 * follows redirections) where the lane passes one on, EVALSHA where Redis has no functions.
 */
function clusterStore(cluster: Cluster, lane: ClusterLane | null, replicaWait: ReplicaWait): Store {
  const evalsha = registerScripts(cluster, 'guarded')
  const functions = new ClusterFunctions(cluster, CLUSTER_LIBRARY)
  let closed = false
  return {
    ...commandsOf(cluster),
    async sendScript(name, keys, argv) {
      if (closed) throw storeClosed()
      if (lane) {
        const onLane = await lane.call(name, keys, argv)
        if (onLane !== PASSED) return onLane
      }
      const reply = await functions.call(name, keys, argv)
      return reply === undefined ? evalsha(name, keys, argv) : reply
    },
    get ready() {
      return cluster.status === 'ready'
    },
    lane: undefined,
    async whenReady(ms) {
      await untilReady(cluster, ms)
      // Every node connected before the first request: one still connecting refuses commands.
      await Promise.all(
        cluster
          .nodes('all')
          .map((node) => (node.status === 'wait' ? node.connect().catch(() => {}) : undefined)),
      )
    },
    async masters() {
      // A fresh Cluster client knows no node until its first slots refresh: asked sooner, it lists
      // none, and a SCAN over that list walks nothing and finds nothing wrong.
      await untilReady(cluster, 15_000)
      return cluster.nodes('master')
    },
    masterOf: (key) => slotMaster(cluster, key),
    waitReplicas: (replicas, ms, masters) => replicaWait.wait(replicas, ms, masters),
    close() {
      closed = true
      lane?.close()
      replicaWait.close()
      cluster.disconnect()
    },
  }
}

/** The commands of `client`, bound to it: either kind of client has every one (by its type). */
function commandsOf(client: Commands): Commands {
  const commands: Record<string, unknown> = {}
  const methods = client as unknown as Record<string, (...args: unknown[]) => unknown>
  for (const name of COMMANDS) commands[name] = methods[name]!.bind(client)
  return commands as unknown as Commands
}

/**
 * Each script as an ioredis command (EVALSHA, EVAL after a SCRIPT FLUSH) in its `form` (the slot
 * guard's only on a Cluster), and how to run one.
 */
function registerScripts(client: Redis | Cluster, form: 'lua' | 'guarded') {
  for (const [name, script] of Object.entries(SCRIPTS))
    client.defineCommand(name, { lua: script[form], numberOfKeys: script.keys })
  const commands = client as unknown as Record<ScriptName, (...args: ScriptArg[]) => Promise<unknown>>
  return (name: ScriptName, keys: string[], argv: ScriptArg[]) =>
    commands[name].call(client, ...keys, ...argv)
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

function untilReady(client: Redis | Cluster, ms: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve()
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', ready)
      reject(new Error(`redis not ready after ${ms} ms (${client.status})`))
    }, ms)
    function ready() {
      clearTimeout(timer)
      resolve()
    }
    client.once('ready', ready)
  })
}
