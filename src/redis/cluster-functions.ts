// Scripts on a Redis Cluster as FCALLs of the function library (functions.ts), routed by their
// keys, rather than EVALSHA of each script's EVAL form, which runs the shared libraries again on
// every call (see BENCHMARKS.md, "Functions on every master"). The library is loaded on every master
// the first time a call finds it missing there (a new cluster, a master added or failed over to a
// node that never had it, FUNCTION FLUSH); a missing function ran nothing, so the call is sent again.
import { Cluster } from 'ioredis'
import type { FunctionLibrary } from './functions.ts'
import { functionName } from './functions.ts'

type Arg = string | number

/** The load under way per cluster client, shared by every call that found the function missing. */
const loading = new WeakMap<Cluster, Promise<void>>()
/** Clusters whose Redis has no functions (before 7.0): their scripts stay EVALSHA. */
const withoutFunctions = new WeakSet<Cluster>()

export function isCluster(client: unknown): client is Cluster {
  return client instanceof Cluster
}

/** FCALL of `script`, or undefined when this cluster runs no functions (the caller uses EVALSHA). */
export async function clusterCall(
  cluster: Cluster,
  library: FunctionLibrary,
  script: string,
  keys: string[],
  args: Arg[],
): Promise<unknown> {
  if (withoutFunctions.has(cluster)) return undefined
  const command: Arg[] = [functionName(library, script), keys.length, ...keys, ...args]
  try {
    return await cluster.call('FCALL', ...command)
  } catch (error) {
    const message = (error as Error).message
    if (/unknown command\W+FCALL/i.test(message)) {
      withoutFunctions.add(cluster)
      return undefined
    }
    if (!/Function not found/i.test(message)) throw error
    await loadOnMasters(cluster, library)
    return cluster.call('FCALL', ...command)
  }
}

function loadOnMasters(cluster: Cluster, library: FunctionLibrary): Promise<void> {
  let load = loading.get(cluster)
  if (!load) {
    load = Promise.all(
      cluster.nodes('master').map((node) =>
        node.call('FUNCTION', 'LOAD', library.code).then(
          () => {},
          (error: Error) => {
            // Another replica of the same version loaded it first.
            if (!/already exists/i.test(error.message)) throw error
          },
        ),
      ),
    )
      .then(() => {})
      .finally(() => loading.delete(cluster))
    loading.set(cluster, load)
  }
  return load
}
