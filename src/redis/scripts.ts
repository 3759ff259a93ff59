// Running the scripts of script-registry.ts by name: their ARGV written in the declared order, then
// sent in whichever form the store runs them (store.ts).
import { SCRIPTS, type ScriptName } from './script-registry.ts'
import type { Store } from './store.ts'

/** A script's reply: a code first, then its values, as its header block documents them. */
export type ScriptReply = (string | number)[]
/** One number of a reply (a missing one reads as 0). */
export const replyNumber = (value: string | number | undefined) => Number(value ?? 0)

type ScriptArg = string | number

/** A script's ARGV by the names its registry entry (and its header block) declares. */
export type ScriptArgs<N extends ScriptName> = Record<(typeof SCRIPTS)[N]['argv'][number], ScriptArg>

/**
 * Runs a registered script: its KEYS, then its ARGV by name, written in the declared order; a
 * variadic script's further values follow in `rest`.
 */
export function runScript<N extends ScriptName>(
  store: Store,
  name: N,
  keys: string[],
  args: ScriptArgs<N>,
  rest: ScriptArg[] = [],
): Promise<unknown> {
  const script = SCRIPTS[name]
  if (keys.length !== script.keys && keys.length !== script.ownKeys)
    throw new Error(
      `${name} takes ${script.keys} keys${script.ownKeys !== script.keys ? ` or ${script.ownKeys}` : ''}`,
    )
  if (rest.length > 0 && !script.variadic) throw new Error(`${name} takes no values beyond its arguments`)
  const named = args as Record<string, ScriptArg | undefined>
  const argv: ScriptArg[] = []
  for (const arg of script.argv) {
    const value = named[arg]
    if (value === undefined) throw new Error(`${name}: ${arg} is missing`)
    argv.push(value)
  }
  for (const value of rest) argv.push(value)
  return store.sendScript(name, keys, argv)
}
