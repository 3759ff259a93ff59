// Scripts on a Redis Cluster over Bun's native client: one connection per master, each FCALL sent
// to the master that ioredis' slot map names for its first key's slot. Bun's client pipelines what
// a tick sends to one node and speaks RESP in native code, which ioredis on a Cluster (whose
// autopipelining is off there: store.ts) does not; see BENCHMARKS.md, "Scripts on a Cluster over
// Bun's native client".
//
// The lane only ever takes the plain case. A call it cannot place (no slot map yet, a master it is
// not connected to yet) or one the master redirects (MOVED, ASK: the slot is elsewhere; TRYAGAIN:
// the slot is being moved, and lib/slot-guard refused it before any write) ran nothing, and goes
// through ioredis, which follows redirections and refreshes its slot map. A connection lost under
// a call is the store's outage, as on ioredis with no offline queue.
import { RedisClient } from 'bun'
import calculateSlot from 'cluster-key-slot'
import type { Cluster } from 'ioredis'
import { type FunctionLibrary, functionName, loaded } from './functions.ts'

/** A reply that says the command ran nothing here. */
const NOT_HERE = /^(MOVED|ASK|TRYAGAIN)\b/

/** The master serving `key`'s slot as `cluster` knows it now ("host:port"), if it knows one. */
export function slotMaster(cluster: Cluster, key: string): string | undefined {
  return cluster.slots[calculateSlot(key)]?.[0]
}

/**
 * A server's "host:port" as a Cluster client names it in its slots (slotMaster), from the client
 * connected to it; '' for one that has no address of its own.
 */
export function masterName(client: object): string {
  const options = (client as { options?: { host?: string; port?: number } }).options
  return options?.host === undefined ? '' : `${options.host}:${options.port}`
}

/** What `call` answers when the lane did not run the script. */
export const PASSED = Symbol('passed to ioredis')

export interface ClusterLaneOptions {
  /** Shown in CLIENT LIST. */
  name: string
  tls: boolean
  password?: string
}

export class ClusterLane {
  /** By node ("host:port"), the native connection to it. */
  private readonly clients = new Map<string, RedisClient>()
  /** The FUNCTION LOAD under way per node, shared by every call that found the function missing. */
  private readonly loading = new WeakMap<RedisClient, Promise<void>>()
  private closed = false
  /** Cleared on a Cluster without functions (before Redis 7): ioredis sends its scripts as EVALSHA. */
  private functions = true

  constructor(
    private readonly cluster: Cluster,
    private readonly library: FunctionLibrary,
    private readonly options: ClusterLaneOptions,
  ) {}

  /** FCALL of `script` on its slot's master; PASSED where the lane did not run it. */
  async call(script: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    const client = this.clientFor(keys[0])
    if (!client) return PASSED
    const command = [functionName(this.library, script), String(keys.length)]
    for (const key of keys) command.push(key)
    for (const arg of args) command.push(String(arg))
    try {
      return await client.send('FCALL', command)
    } catch (error) {
      const message = (error as Error).message ?? ''
      if (NOT_HERE.test(message)) return PASSED
      if (/unknown command\W+FCALL/i.test(message)) {
        this.functions = false
        return PASSED
      }
      if (!/Function not found/i.test(message)) throw error
      await this.load(client)
      return client.send('FCALL', command)
    }
  }

  close(): void {
    this.closed = true
    for (const client of this.clients.values()) client.close()
    this.clients.clear()
  }

  /** The connected client of the master serving `key`'s slot, as ioredis knows it; else undefined. */
  private clientFor(key: string | undefined): RedisClient | undefined {
    if (this.closed || !this.functions || key === undefined || this.cluster.status !== 'ready')
      return undefined
    const node = slotMaster(this.cluster, key)
    if (!node) return undefined
    let client = this.clients.get(node)
    if (!client) {
      client = this.open(node)
      this.clients.set(node, client)
    }
    return client.connected ? client : undefined
  }

  private open(node: string): RedisClient {
    const auth = this.options.password ? `:${encodeURIComponent(this.options.password)}@` : ''
    const url = `${this.options.tls ? 'rediss' : 'redis'}://${auth}${node}`
    // No offline queue: a script is never sent late, on a connection that was down when it was asked.
    const client = new RedisClient(url, { enableOfflineQueue: false, autoReconnect: true })
    client.onconnect = () => {
      client.send('CLIENT', ['SETNAME', this.options.name]).catch(() => {})
    }
    client.connect().catch(() => {})
    return client
  }

  private load(client: RedisClient): Promise<void> {
    let loading = this.loading.get(client)
    if (!loading) {
      loading = loaded(client.send('FUNCTION', ['LOAD', this.library.code])).finally(() =>
        this.loading.delete(client),
      )
      this.loading.set(client, loading)
    }
    return loading
  }
}
