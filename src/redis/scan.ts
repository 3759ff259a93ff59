// Walking the keys that match a glob: SCAN walks one server, so on a Cluster every master is walked.
// Each batch is one node's, so a caller may pipeline over it (a pipeline reaches one node).
import type { Commands, Store } from './store.ts'

/** Calls `visit` with each batch of keys matching `pattern`, node by node, and the node it is on. */
export async function forEachKeyBatch(
  store: Store,
  pattern: string,
  visit: (keys: string[], node: Commands) => Promise<void>,
): Promise<void> {
  for (const node of await store.masters()) {
    let cursor = '0'
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
      cursor = next
      if (keys.length > 0) await visit(keys, node)
    } while (cursor !== '0')
  }
}

/** Every key matching `pattern`. */
export async function scanKeys(store: Store, pattern: string): Promise<string[]> {
  const found: string[] = []
  await forEachKeyBatch(store, pattern, async (keys) => {
    found.push(...keys)
  })
  return found
}
