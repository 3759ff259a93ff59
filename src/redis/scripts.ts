// Every lua/*.lua, embedded as text so the compiled binary carries it, registered once per
// connection with defineCommand (EVALSHA, with a fallback to EVAL after a SCRIPT FLUSH), and run
// through the connection's native script lane when it has one (script-lane.ts), there as a Redis
// function (functions.ts).
import type Redis from 'ioredis'
import catalogReplace from '../../lua/catalog-replace.lua' with { type: 'text' }
import createAccount from '../../lua/create-account.lua' with { type: 'text' }
import credit from '../../lua/credit.lua' with { type: 'text' }
import mintKey from '../../lua/mint-key.lua' with { type: 'text' }
import revokeKey from '../../lua/revoke-key.lua' with { type: 'text' }
import touchKey from '../../lua/touch-key.lua' with { type: 'text' }
import { functionLibrary } from './functions.ts'
import { FUNDING_SCRIPTS } from './funding-scripts.ts'
import { MARKET_SCRIPTS } from './market-scripts.ts'
import type { ScriptLane } from './script-lane.ts'
import { standalone } from './standalone-script.ts'

export const SCRIPTS = {
  catalogReplace: standalone(catalogReplace, 2),
  createAccount: standalone(createAccount, 5),
  mintKey: standalone(mintKey, 3),
  revokeKey: standalone(revokeKey, 2),
  touchKey: standalone(touchKey, 1),
  credit: standalone(credit, 2),
  ...MARKET_SCRIPTS,
  ...FUNDING_SCRIPTS,
} as const

export type ScriptName = keyof typeof SCRIPTS

/** Every script as one Redis function library, for the native lane (functions.ts). */
export const LIBRARY = functionLibrary(SCRIPTS)

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

/** The connection's native lane while it is up, else undefined (ioredis then carries the script). */
export function readyScriptLane(redis: Redis): ScriptLane | undefined {
  const lane = lanes.get(redis)
  return lane?.ready ? lane : undefined
}

type ScriptArg = string | number
type ScriptCommand = (...args: ScriptArg[]) => Promise<unknown>

/** Runs a registered script: its KEYS then its ARGV, as its header block documents them. */
export function runScript(
  redis: Redis,
  name: ScriptName,
  keys: string[],
  args: ScriptArg[],
): Promise<unknown> {
  if (keys.length !== SCRIPTS[name].keys) throw new Error(`${name} takes ${SCRIPTS[name].keys} keys`)
  const lane = readyScriptLane(redis)
  if (lane) return lane.call(LIBRARY, name, SCRIPTS[name].lua, keys, args)
  const command = (redis as unknown as Record<ScriptName, ScriptCommand>)[name]
  return command.call(redis, ...keys, ...args)
}
