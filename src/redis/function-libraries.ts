// The gateway's function libraries stored in a Redis (functions.ts): two per deployed version (a
// single server's and a Cluster's; a prune keeps both of its own build's), and
// Redis persists and replicates them, so they pile up until deleted. Listing and pruning them is
// `svc-gateway functions`. Deleting a library that a running replica of another version still
// calls is harmless: its next call finds the function missing, loads the library again and is sent
// again (script-lane.ts). Libraries of any other name are never listed or touched: another
// application may share the Redis.
import { GATEWAY_LIBRARY_NAME } from './functions.ts'
import type { Commands } from './store.ts'

export interface StoredLibrary {
  name: string
  /** One of the build's libraries asking (script-registry.ts BUILD_LIBRARIES). */
  current: boolean
  /** Bytes of its source, as FUNCTION LIST WITHCODE gives it. */
  codeBytes: number
}

export interface PruneResult {
  /** Every other version's library: deleted, unless it was a dry run. */
  stale: StoredLibrary[]
  /** This build's libraries that Redis has. */
  kept: StoredLibrary[]
}

/** The gateway libraries in Redis, by name; those named in `currentNames` marked current. */
export async function listGatewayLibraries(
  store: Commands,
  currentNames: readonly string[],
): Promise<StoredLibrary[]> {
  let reply: unknown
  try {
    // Redis matches LIBRARYNAME as a glob without case, so the regex below still decides; the
    // pattern only spares sending other applications' code.
    reply = await store.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'svc_*', 'WITHCODE')
  } catch (error) {
    if (/unknown command\W+FUNCTION/i.test((error as Error).message)) {
      throw new Error('this Redis has no FUNCTION command (functions came with Redis 7.0)')
    }
    throw error
  }
  return (reply as unknown[][])
    .map((entry) => fields(entry))
    .filter(({ library_name }) => GATEWAY_LIBRARY_NAME.test(String(library_name)))
    .map(({ library_name, library_code }) => ({
      name: String(library_name),
      current: currentNames.includes(String(library_name)),
      codeBytes: Buffer.byteLength(String(library_code ?? '')),
    }))
    .sort((a, b) => a.name.localeCompare(b.name))
}

/** Deletes every gateway library but `currentNames` (nothing when `dryRun`) and says which. */
export async function pruneGatewayLibraries(
  store: Commands,
  currentNames: readonly string[],
  { dryRun }: { dryRun: boolean },
): Promise<PruneResult> {
  const libraries = await listGatewayLibraries(store, currentNames)
  const stale = libraries.filter((library) => !library.current)
  if (!dryRun) {
    for (const { name } of stale) {
      await store.call('FUNCTION', 'DELETE', name).catch((error: Error) => {
        // Gone since the list (another prune at the same time): what was asked for.
        if (!/library not found/i.test(error.message)) throw error
      })
    }
  }
  return { stale, kept: libraries.filter((library) => library.current) }
}

/** One FUNCTION LIST entry (a flat list of names and values) as an object. */
function fields(entry: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (let i = 0; i + 1 < entry.length; i += 2) out[String(entry[i])] = entry[i + 1]
  return out
}
