// The store as it was: every key under a prefix saved now (DUMP), and put back later, with what
// was written since removed. What a failover to a replica that lagged behind leaves a gateway
// with: a store that is consistent, only older. (stack.ts's snapshotKeys reads keys to compare;
// this one saves them to restore.)
import { scanKeys } from '../../src/redis/scan.ts'
import type { Store } from '../../src/redis/store.ts'

export interface SavedKeys {
  /** Puts every key back as it was dumped, and deletes those made since. */
  restore(): Promise<void>
}

export async function saveKeys(store: Store, prefix: string): Promise<SavedKeys> {
  const pattern = `${prefix}*`
  const saved = new Map<string, { dump: Buffer; ttl: number }>()
  for (const key of await scanKeys(store, pattern)) {
    const [dump, ttl] = await Promise.all([store.dumpBuffer(key), store.pttl(key)])
    if (dump) saved.set(key, { dump, ttl: Math.max(ttl, 0) })
  }
  return {
    async restore() {
      for (const key of await scanKeys(store, pattern)) if (!saved.has(key)) await store.del(key)
      for (const [key, { dump, ttl }] of saved) await store.restore(key, ttl, dump, 'REPLACE')
    },
  }
}
