// `svc-gateway functions [list]` and `svc-gateway functions prune [--dry-run]`: the gateway's
// function libraries in Redis (REDIS_URL), one per deployed version; prune deletes all but this
// build's (src/redis/function-libraries.ts).
import { parseArgs } from 'node:util'
import { loadStoreConfig } from '../config.ts'
import { isRedisUnavailable } from '../redis/connection.ts'
import {
  listGatewayLibraries,
  type PruneResult,
  pruneGatewayLibraries,
  type StoredLibrary,
} from '../redis/function-libraries.ts'
import { BUILD_LIBRARIES, CLUSTER_LIBRARY, LIBRARY } from '../redis/script-registry.ts'
import { createStore } from '../redis/store.ts'
import { parseRedisTarget } from '../redis/target.ts'

export const FUNCTIONS_USAGE = `usage:
  svc-gateway functions [list]            the gateway's libraries in Redis, this build's marked
  svc-gateway functions prune [--dry-run] delete every svc_<16 hex> library but this build's two`

type Command = { name: 'list' } | { name: 'prune'; dryRun: boolean }

export async function functions(args: string[]): Promise<void> {
  const command = parse(args)
  if (!command) {
    console.error(FUNCTIONS_USAGE)
    process.exitCode = 2
    return
  }
  const config = loadStoreConfig()
  let connectError: Error | undefined
  const store = createStore(config.redisUrl, {
    name: 'svc-cli',
    onError: (error) => {
      connectError = error
    },
  })
  try {
    // A Cluster loads the library on every master (cluster-functions.ts): each is read or pruned.
    const nodes = await store.masters()
    if (command.name === 'list') {
      // The library a gateway on this Redis loads: the Cluster's, with the slot guard, or the single server's.
      const own = parseRedisTarget(config.redisUrl).kind === 'cluster' ? CLUSTER_LIBRARY : LIBRARY
      printList(
        mergeLists(await Promise.all(nodes.map((node) => listGatewayLibraries(node, BUILD_LIBRARIES)))),
        own.name,
      )
    } else {
      const results = await Promise.all(
        nodes.map((node) => pruneGatewayLibraries(node, BUILD_LIBRARIES, command)),
      )
      printPrune(
        {
          stale: mergeLists(results.map((result) => result.stale)),
          kept: mergeLists(results.map((result) => result.kept)),
        },
        command.dryRun,
      )
    }
  } catch (error) {
    // main prints the message and exits 1; the reason ioredis saw is clearer than its retry error.
    if (isRedisUnavailable(error)) {
      throw new Error(`functions: cannot reach Redis (${connectError?.message ?? (error as Error).message})`)
    }
    throw new Error(`functions: ${(error as Error).message}`)
  } finally {
    store.close()
  }
}

function parse(args: string[]): Command | null {
  try {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: { 'dry-run': { type: 'boolean' } },
    })
    const [name = 'list', ...rest] = positionals
    if (rest.length) return null
    if (name === 'list' && !values['dry-run']) return { name }
    if (name === 'prune') return { name, dryRun: values['dry-run'] === true }
    return null
  } catch {
    return null
  }
}

/** One entry per library name, whichever masters hold it (they hold the same code). */
function mergeLists(lists: StoredLibrary[][]): StoredLibrary[] {
  const byName = new Map<string, StoredLibrary>()
  for (const library of lists.flat()) byName.set(library.name, library)
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name))
}

function bytes(library: StoredLibrary): string {
  return `${library.codeBytes} bytes`
}

/** `own`: the build's library that a gateway on this Redis calls. */
function printList(libraries: StoredLibrary[], own: string): void {
  for (const library of libraries) {
    console.log(`${library.name}  ${bytes(library)}${library.current ? '  (this build)' : ''}`)
  }
  if (!libraries.some((library) => library.name === own)) {
    console.log(`${own}  not loaded  (this build; a gateway loads it on its first script call)`)
  }
}

function printPrune({ stale, kept }: PruneResult, dryRun: boolean): void {
  const verb = dryRun ? 'would delete' : 'deleted'
  for (const library of stale) console.log(`${verb} ${library.name}  ${bytes(library)}`)
  for (const library of kept) console.log(`kept ${library.name}  ${bytes(library)}  (this build)`)
  const freed = stale.reduce((sum, library) => sum + library.codeBytes, 0)
  console.log(
    `functions: ${verb} ${stale.length} old librar${stale.length === 1 ? 'y' : 'ies'} (${freed} bytes)`,
  )
}
