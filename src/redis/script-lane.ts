// Scripts over Bun's own Redis client. On a single Redis, every script (an FCALL of the function
// library, functions.ts) goes through Bun's native client (socket and RESP in native code) instead
// of ioredis on node:net, whose socket writes were the gateway's top CPU entry: the same Redis
// work serves more requests per second (see BENCHMARKS.md, "Scripts over Bun's native Redis client").
// ioredis keeps everything else, and Sentinel and Cluster, which Bun's client does not speak.
//
// The store (store.ts) owns the lane beside its ioredis connection and hands it a script only
// while both are up; otherwise the script goes through ioredis, whose own rules (fail fast on a
// serving connection, queue for the tools) then apply, so the lane can never make Redis look less
// or more available than the store's reads find it.
import { RedisClient } from 'bun'
import { type FunctionLibrary, functionName, loaded } from './functions.ts'

/** A dropped connection is retried by Bun's client; past its retries, once a second from here. */
const RECONNECT_EVERY_MS = 1_000

export class ScriptLane {
  private readonly client: RedisClient
  private readonly shas = new Map<string, string>()
  private lastConnect = 0
  private closed = false
  /** The FUNCTION LOAD under way per library, shared by every call that found its function missing. */
  private readonly loading = new Map<string, Promise<void>>()
  /** Cleared on a Redis without functions (before 7.0): EVALSHA of the scripts' EVAL forms then. */
  private functions = true

  /** `name` is shown in CLIENT LIST, as the ioredis connection's own name is. */
  constructor(url: string, name: string) {
    // No offline queue: a script is never sent late, on a connection that was down when it was asked.
    this.client = new RedisClient(url, { enableOfflineQueue: false, autoReconnect: true })
    this.client.onconnect = () => {
      this.client.send('CLIENT', ['SETNAME', name]).catch(() => {})
    }
    this.connect()
  }

  /** True while scripts can go this way. A lane that is down asks to reconnect (at most once a second). */
  get ready(): boolean {
    if (this.closed) return false
    if (this.client.connected) return true
    this.connect()
    return false
  }

  /** EVALSHA of `lua`; EVAL (which caches it) when Redis does not have it (a restart, SCRIPT FLUSH). */
  async run(lua: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    const tail = [String(keys.length), ...keys, ...args.map(String)]
    try {
      return await this.client.send('EVALSHA', [this.sha(lua), ...tail])
    } catch (error) {
      if (!/^NOSCRIPT/.test((error as Error).message)) throw error
      return this.client.send('EVAL', [lua, ...tail])
    }
  }

  /**
   * FCALL of `script` in `library`; the library is loaded first when Redis does not have it (a
   * restart without persistence, FUNCTION FLUSH). A missing function ran nothing, so the call is
   * simply sent again. `lua` is the script's EVAL form, for a Redis without functions.
   */
  async call(
    library: FunctionLibrary,
    script: string,
    lua: string,
    keys: string[],
    args: (string | number)[],
  ): Promise<unknown> {
    if (!this.functions) return this.run(lua, keys, args)
    // Built in one pass: this runs for every admit and clear.
    const command = [functionName(library, script), String(keys.length)]
    for (const key of keys) command.push(key)
    for (const arg of args) command.push(String(arg))
    try {
      return await this.client.send('FCALL', command)
    } catch (error) {
      const message = (error as Error).message
      if (/unknown command\W+FCALL/i.test(message)) {
        this.functions = false
        return this.run(lua, keys, args)
      }
      if (!/Function not found/i.test(message)) throw error
      await this.load(library)
      return this.client.send('FCALL', command)
    }
  }

  close(): void {
    this.closed = true
    this.client.close()
  }

  private load(library: FunctionLibrary): Promise<void> {
    let loading = this.loading.get(library.name)
    if (!loading) {
      loading = loaded(this.client.send('FUNCTION', ['LOAD', library.code])).finally(() =>
        this.loading.delete(library.name),
      )
      this.loading.set(library.name, loading)
    }
    return loading
  }

  private sha(lua: string): string {
    let sha = this.shas.get(lua)
    if (!sha) {
      sha = new Bun.CryptoHasher('sha1').update(lua).digest('hex')
      this.shas.set(lua, sha)
    }
    return sha
  }

  private connect(): void {
    if (Date.now() - this.lastConnect < RECONNECT_EVERY_MS) return
    this.lastConnect = Date.now()
    this.client.connect().catch(() => {})
  }
}
