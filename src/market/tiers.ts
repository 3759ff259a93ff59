// The capacity tiers (lua/lib/ladder.lua) are kept by this build's scripts only: a build that keeps
// none puts offers on the ladder in no tier. So admit walks them only while `tiered` is on the
// market hash, set by the reaper's sweep once it has read the ladder through, and a sweep counts
// only if it began after this replica's start and after the last replica of such a build was seen
// (the reaper tells the sweep so each pass: replicas.ts tierlessBuildSeen). A start clears it: a
// build keeping none may have run while no replica of this one was there to see it.
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

export async function armTierSweep(store: Store, keys: Keyspace): Promise<void> {
  // Held apart there are no tiers: the view's walk is in the gateway.
  if (keys.layout !== 'one-slot') return
  await store.multi().hdel(keys.market, 'tiered').hset(keys.market, 'tierSwept', '-inf').exec()
}
