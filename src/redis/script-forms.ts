// The two shapes a script of the registry (script-registry.ts) takes: a standalone script, its body
// alone, and a market script, assembled from the libraries it includes.
import { MARKET_PROLOGUE, SLOT_GUARD } from './lua-libraries.ts'

// Each script has two EVAL forms: `lua` for a single server, `guarded` (the slot guard first) for a
// Cluster, as it has a function in each of the build's two libraries (functions.ts).
//
// Each script declares how many KEYS it takes and its ARGV by name, in order, as its header block
// numbers and names them (a test reads the headers); a caller passes the ARGV as an object by those
// names, and runScript writes them in the declared order. A variadic script takes its declared ARGV
// and then more, as its header says (a payout's step and that step's values, the catalog's rows).

/**
 * A script that includes no library: its EVAL form is its body. `ownKeys`: how many of its first
 * KEYS (its owner's) it may be passed alone, in a market held apart, where the rest are on another
 * slot and indexed by a step of their own.
 */
export const standalone = <const A extends readonly string[]>(
  lua: string,
  keys: number,
  argv: A,
  variadic = false,
  ownKeys = keys,
) => ({
  lua,
  guarded: `${SLOT_GUARD}\n${lua}`,
  body: lua,
  market: false,
  keys,
  ownKeys,
  argv,
  variadic,
})

/** A market script: the libraries it calls, the prologue, then its body; one key, the keyspace base. */
export const market = <const A extends readonly string[]>(
  libs: string[],
  body: string,
  argv: A,
  variadic = false,
) => ({
  lua: [...libs, MARKET_PROLOGUE, body].join('\n'),
  guarded: [...libs, SLOT_GUARD, MARKET_PROLOGUE, body].join('\n'),
  body,
  market: true,
  keys: 1,
  ownKeys: 1,
  argv,
  variadic,
})
