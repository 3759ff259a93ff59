// Every Redis key is named here and nowhere else. All of them share the prefix's one hash tag, so
// every Lua script's keys land in one slot: the same code runs on a single Redis, Sentinel and Cluster.

export function keyspace(prefix: string) {
  const key = (suffix: string) => `${prefix}:${suffix}`
  return {
    prefix,
    /** hash: model id -> catalog entry JSON */
    catalog: key('catalog'),
    /** hash: syncedAt (ms), source, count */
    catalogMeta: key('catalog:meta'),
  }
}

export type Keyspace = ReturnType<typeof keyspace>
