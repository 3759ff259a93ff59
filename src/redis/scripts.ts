// Every lua/*.lua, embedded as text so the compiled binary carries it, registered once per
// connection with defineCommand (EVALSHA, with a fallback to EVAL after a SCRIPT FLUSH).
import type Redis from 'ioredis'
import catalogReplace from '../../lua/catalog-replace.lua' with { type: 'text' }
import createAccount from '../../lua/create-account.lua' with { type: 'text' }
import credit from '../../lua/credit.lua' with { type: 'text' }
import mintKey from '../../lua/mint-key.lua' with { type: 'text' }
import revokeKey from '../../lua/revoke-key.lua' with { type: 'text' }
import touchKey from '../../lua/touch-key.lua' with { type: 'text' }
import { FUNDING_SCRIPTS } from './funding-scripts.ts'
import { MARKET_SCRIPTS } from './market-scripts.ts'

export const SCRIPTS = {
  catalogReplace: { lua: catalogReplace, keys: 2 },
  createAccount: { lua: createAccount, keys: 5 },
  mintKey: { lua: mintKey, keys: 3 },
  revokeKey: { lua: revokeKey, keys: 2 },
  touchKey: { lua: touchKey, keys: 1 },
  credit: { lua: credit, keys: 2 },
  ...MARKET_SCRIPTS,
  ...FUNDING_SCRIPTS,
} as const

export type ScriptName = keyof typeof SCRIPTS

export function registerScripts(redis: Redis): void {
  for (const [name, { lua, keys }] of Object.entries(SCRIPTS)) {
    redis.defineCommand(name, { lua, numberOfKeys: keys })
  }
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
  const command = (redis as unknown as Record<ScriptName, ScriptCommand>)[name]
  return command.call(redis, ...keys, ...args)
}
