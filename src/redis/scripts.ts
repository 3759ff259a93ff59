// Running the scripts of script-registry.ts: registered once per ioredis connection with
// defineCommand (EVALSHA, with a fallback to EVAL after a SCRIPT FLUSH), and run through the
// connection's native script lane when it has one (script-lane.ts), there as a Redis function
// (functions.ts).
import type Redis from 'ioredis'
import { clusterCall, isCluster } from './cluster-functions.ts'
import type { ScriptLane } from './script-lane.ts'
import { LIBRARY, SCRIPTS, type ScriptName } from './script-registry.ts'

export function registerScripts(redis: Redis): void {
  for (const [name, { lua, keys }] of Object.entries(SCRIPTS)) {
    redis.defineCommand(name, { lua, numberOfKeys: keys })
  }
}

/** The native lane of an ioredis connection, when it has one (a single Redis; see connection.ts). */
const lanes = new WeakMap<Redis, ScriptLane>()

export function attachScriptLane(redis: Redis, lane: ScriptLane): void {
  lanes.set(redis, lane)
  const close = () => {
    if (lanes.get(redis) !== lane) return
    lanes.delete(redis)
    lane.close()
  }
  // ioredis ends for good only when told to (disconnect, quit): the lane goes with it. Told while
  // it waits to reconnect to a Redis that is down, ioredis emits no 'end', and the lane, still
  // reconnecting, kept a tool's process alive: so the telling closes the lane too.
  redis.once('end', close)
  const disconnect = redis.disconnect.bind(redis)
  redis.disconnect = (reconnect = false) => {
    if (!reconnect) close()
    disconnect(reconnect)
  }
  const quit = redis.quit.bind(redis)
  redis.quit = ((...args: Parameters<Redis['quit']>) => {
    close()
    return quit(...args)
  }) as Redis['quit']
}

/**
 * The connection's native lane while both it and the ioredis connection are up, else undefined
 * (ioredis then carries the script, and refuses it as it refuses every other command). One
 * readiness for both: after a restart or a data set load, ioredis turns ready only once its own
 * check finds Redis loaded, while the lane's socket is open all along; a lane that served scripts
 * sooner had a replica serve paid requests while its account reads still answered 503.
 */
export function readyScriptLane(redis: Redis): ScriptLane | undefined {
  const lane = lanes.get(redis)
  return lane?.ready && redis.status === 'ready' ? lane : undefined
}

/** A script's reply: a code first, then its values, as its header block documents them. */
export type ScriptReply = (string | number)[]
/** One number of a reply (a missing one reads as 0). */
export const replyNumber = (value: string | number | undefined) => Number(value ?? 0)

type ScriptArg = string | number
type ScriptCommand = (...args: ScriptArg[]) => Promise<unknown>

/** A script's ARGV by the names its registry entry (and its header block) declares. */
export type ScriptArgs<N extends ScriptName> = Record<(typeof SCRIPTS)[N]['argv'][number], ScriptArg>

/**
 * Runs a registered script: its KEYS, then its ARGV by name, written in the declared order; a
 * variadic script's further values follow in `rest`.
 */
export function runScript<N extends ScriptName>(
  redis: Redis,
  name: N,
  keys: string[],
  args: ScriptArgs<N>,
  rest: ScriptArg[] = [],
): Promise<unknown> {
  const script = SCRIPTS[name]
  if (keys.length !== script.keys) throw new Error(`${name} takes ${script.keys} keys`)
  if (rest.length > 0 && !script.variadic) throw new Error(`${name} takes no values beyond its arguments`)
  const named = args as Record<string, ScriptArg | undefined>
  const argv: ScriptArg[] = []
  for (const arg of script.argv) {
    const value = named[arg]
    if (value === undefined) throw new Error(`${name}: ${arg} is missing`)
    argv.push(value)
  }
  for (const value of rest) argv.push(value)
  const lane = readyScriptLane(redis)
  if (lane) return lane.call(LIBRARY, name, script.lua, keys, argv)
  const command = (redis as unknown as Record<ScriptName, ScriptCommand>)[name]
  if (!isCluster(redis)) return command.call(redis, ...keys, ...argv)
  return clusterCall(redis, LIBRARY, name, keys, argv).then((reply) =>
    reply === undefined ? command.call(redis, ...keys, ...argv) : reply,
  )
}
