// Scripts over Bun's own Redis client. On a single Redis, every EVALSHA goes through Bun's native
// client (socket and RESP in native code) instead of ioredis on node:net, whose socket writes were
// the gateway's top CPU entry; bench/cpu.ts measured 25-35% more buffered requests per second at 32
// clients with the same Redis work. ioredis keeps everything else, and Sentinel and Cluster, which
// Bun's client does not speak.
//
// The lane only carries a script while its connection is up; otherwise the script goes through
// ioredis as before, whose own rules (fail fast on a serving connection, queue for the tools) then
// apply, so the lane can never make Redis look less available than it is.
import { RedisClient } from 'bun'

/** A dropped connection is retried by Bun's client; past its retries, once a second from here. */
const RECONNECT_EVERY_MS = 1_000

export class ScriptLane {
  private readonly client: RedisClient
  private readonly shas = new Map<string, string>()
  private lastConnect = 0
  private closed = false

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

  close(): void {
    this.closed = true
    this.client.close()
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
