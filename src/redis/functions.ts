// The scripts as one Redis function library: FUNCTION LOAD once, then an FCALL per call. Loaded
// once, the libraries' definitions (lua/lib/*.lua) run once, not on every call as in a script's
// EVAL form; the hot pair costs Redis that much less. The native lane (script-lane.ts) and a
// Cluster (cluster-functions.ts) call functions; ioredis elsewhere (Sentinel, a lane that is down)
// keeps the EVAL forms.
//
// Redis persists and replicates functions (RDB, AOF, replicas), unlike the script cache: so a
// library outlives the gateway that loaded it. Its name is derived from its code, so two versions
// of the gateway on one Redis (a rolling deploy) each load and call their own and never replace
// the other's; a library Redis lost (a restart without persistence, FUNCTION FLUSH) is loaded
// again on the first call that misses it. The gateway never deletes an old version's library
// itself: one per deployed version stays, about 50 KB of source each, until an operator runs
// `svc-gateway functions prune` (function-libraries.ts), which deletes all but its own build's. A
// replica still calling a deleted one just loads it again. Past maxmemory Redis refuses a function
// that may write before it runs, where an EVAL form failed at its first write: nothing is written
// either way.
//
// Each build makes two libraries of the same scripts: one whose functions begin with the slot guard
// (lua/lib/slot-guard.lua), for a Cluster, and one without, for a single server, which never splits
// a slot and so would pay the guard's call on every script for nothing. Both are named from their
// code, so both are this build's (script-registry.ts BUILD_LIBRARIES) and a prune keeps both.
import { createHash } from 'node:crypto'
import { MARKET_LIBS, MARKET_PROLOGUE, SLOT_GUARD } from './lua-libraries.ts'

export interface FunctionLibrary {
  /** svc_ and 16 hex digits of the code's hash (GATEWAY_LIBRARY_NAME). */
  name: string
  /** FUNCTION LOAD's argument. */
  code: string
}

interface LibraryScript {
  body: string
  /** A market script: the libraries and the prologue come before its body. */
  market: boolean
}

/** The name of every library functionLibrary makes, whatever the version: what prune may delete. */
export const GATEWAY_LIBRARY_NAME = /^svc_[0-9a-f]{16}$/

/**
 * FUNCTION LOAD's answer as a promise that resolves once the library is there: a load refused
 * because another connection or replica of the same version loaded it first counts as loaded.
 */
export function loaded(load: Promise<unknown>): Promise<void> {
  return load.then(
    () => {},
    (error: Error) => {
      if (!/already exists/i.test(error.message)) throw error
    },
  )
}

/** The function a script is registered as in `library`. */
export const functionName = (library: FunctionLibrary, script: string) => `${library.name}_${script}`

/**
 * Every script as a function taking (KEYS, ARGV), as its body reads them. A library's load sees no
 * globals, so the libraries only define there; their per-call state is set by the prologue.
 * `guarded`: each function runs the slot guard first (a Cluster's library).
 */
export function functionLibrary(
  scripts: Record<string, LibraryScript>,
  { guarded }: { guarded: boolean },
): FunctionLibrary {
  const entries = Object.entries(scripts)
  const guard = guarded ? `${SLOT_GUARD}\n` : ''
  const name = `svc_${createHash('sha1')
    .update(JSON.stringify([MARKET_LIBS, guard, MARKET_PROLOGUE, entries]))
    .digest('hex')
    .slice(0, 16)}`
  const library = { name, code: '' }
  const functions = entries.map(
    ([script, { body, market }]) =>
      `redis.register_function('${functionName(library, script)}', function(KEYS, ARGV)\n${guard}${market ? `${MARKET_PROLOGUE}\n` : ''}${body}\nend)`,
  )
  library.code = [`#!lua name=${name}`, ...MARKET_LIBS, ...functions].join('\n')
  return library
}
