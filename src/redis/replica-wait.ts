// Waiting for replicas: WAIT blocks its own connection until the replicas have every write that
// connection made, so each master gets a connection of its own that writes a marker and then
// waits. A master applies and replicates one command at a time, in order: once its replicas have
// the marker, they have every write the master acknowledged before it, whichever connection made it.
import calculateSlot from 'cluster-key-slot'
import type { Cluster, Redis } from 'ioredis'

/** The marker: short-lived, outside every market's keys, one per master on a Cluster (by its tag). */
const MARKER = 'svc-replicated'
const MARKER_TTL_MS = '10000'

export interface ReplicaWait {
  /**
   * For each master (on a Cluster, each of `masters` where named and known): how many replicas had
   * its writes once `replicas` did or `ms` passed.
   */
  wait(replicas: number, ms: number, masters?: readonly string[]): Promise<number[]>
  close(): void
}

/**
 * A single server, or a Sentinel's master: one connection of its own, opened on first use (its
 * first wait queued while it connects, even where the store's own connections fail fast).
 */
export function serverReplicaWait(redis: Redis, name: string): ReplicaWait {
  let own: Redis | null = null
  return {
    async wait(replicas, ms) {
      if (!own) {
        own = redis.duplicate({ connectionName: name, enableAutoPipelining: false, enableOfflineQueue: true })
        // A wait that fails says so to its caller; the store's own connection reports the outage.
        own.on('error', () => {})
      }
      return [await markAndWait(own, MARKER, replicas, ms)]
    },
    close() {
      own?.disconnect()
    },
  }
}

/** A Cluster: a client of its own, and on each master a marker key of a slot that master serves. */
export function clusterReplicaWait(cluster: Cluster, name: string): ReplicaWait {
  let own: Cluster | null = null
  let markers: Markers | null = null
  return {
    async wait(replicas, ms, masters) {
      if (!own) {
        own = cluster.duplicate(undefined, {
          enableOfflineQueue: true,
          redisOptions: { ...cluster.options.redisOptions, connectionName: name },
        })
        own.on('error', () => {})
      }
      const client = own
      markers = markersOnMasters(cluster, markers)
      return Promise.all(
        markersOf(markers, masters).map((marker) => markAndWait(client, marker, replicas, ms)),
      )
    },
    close() {
      own?.disconnect()
    },
  }
}

async function markAndWait(client: Redis | Cluster, marker: string, replicas: number, ms: number) {
  // One pipeline: on a Cluster both go to the marker's master, on the same connection.
  const results = await client
    .pipeline()
    .set(marker, '1', 'PX', MARKER_TTL_MS)
    .call('WAIT', replicas, ms)
    .exec()
  const [error, count] = results?.[1] ?? [new Error('no reply to WAIT'), 0]
  if (error) throw error
  return Number(count)
}

/** A marker key for each master, and the master ("host:port") each was found on. */
interface Markers {
  keys: string[]
  masters: string[]
  /** The masters the client listed then (one that serves no slot yet has no marker). */
  listed: number
}

/** The markers of `masters`; every master's where none are named, or one named has no marker (not known yet). */
function markersOf(markers: Markers, masters: readonly string[] | undefined): string[] {
  if (!masters || masters.length === 0) return markers.keys
  const keys: string[] = []
  for (const master of masters) {
    const i = markers.masters.indexOf(master)
    if (i < 0) return markers.keys
    keys.push(markers.keys[i]!)
  }
  return keys
}

/**
 * A marker key for each master the Cluster client knows, found by the slot of its tag: those found
 * before while each still lies on its master and no master came or went (every round asks), else
 * found again over the slots.
 */
function markersOnMasters(cluster: Cluster, known: Markers | null): Markers {
  const slots = cluster.slots
  if (
    known &&
    known.listed === cluster.nodes('master').length &&
    known.keys.every((key, i) => slots[calculateSlot(key)]?.[0] === known.masters[i])
  )
    return known
  const masters = new Set(slots.map((owners) => owners?.[0]).filter((key) => key !== undefined))
  const found = new Map<string, string>()
  for (let i = 0; found.size < masters.size && i < 100_000; i++) {
    const key = `${MARKER}{${i}}`
    const master = slots[calculateSlot(key)]?.[0]
    if (master && !found.has(master)) found.set(master, key)
  }
  return { keys: [...found.values()], masters: [...found.keys()], listed: cluster.nodes('master').length }
}
