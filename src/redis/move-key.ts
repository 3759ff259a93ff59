// Moving a key to another name, which may be on another slot of a Cluster (where RENAME and COPY
// cannot reach): DUMP and RESTORE, with its time to live, then DEL. RESTORE writes a key whole or
// not at all, so a move stopped between its two writes leaves the key on both sides, the copy
// complete: run again, it keeps the copy and deletes the original. Only for a key nothing else
// writes meanwhile (a market whose gateways are stopped).
import type { Store } from './store.ts'

/** Moves `from` to `to`; false when nothing was at `from` (moved already, or never there). */
export async function moveKey(store: Store, from: string, to: string): Promise<boolean> {
  const payload = await store.dumpBuffer(from)
  if (!payload) return false
  const ttl = await store.pttl(from)
  // Expired between the two reads: nothing left to move.
  if (ttl === -2) return false
  try {
    await store.restore(to, Math.max(ttl, 0), payload)
  } catch (error) {
    // Already there: a move stopped after its RESTORE, whose copy is whole.
    if (!/BUSYKEY/.test((error as Error).message)) throw error
  }
  await store.del(from)
  return true
}
