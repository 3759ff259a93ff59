// The lease scripts' typed wrappers: renew pushes an in-flight attempt's lease forward, reap ends
// the attempts whose lease expired (lua/renew.lua, lua/reap.lua).
import { DEFAULT_RECORD_RETENTION_MS } from '../records/refusals.ts'
import type { Keyspace } from '../redis/keys.ts'
import { RenewCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'

export async function renewLease(
  store: Store,
  keys: Keyspace,
  attemptId: string,
  leaseMs: number,
): Promise<boolean> {
  return Number(await runScript(store, 'renew', [keys.base], { attemptId, leaseMs })) === RenewCode.Renewed
}

export async function reapExpired(
  store: Store,
  keys: Keyspace,
  limit = 100,
  recordRetentionMs?: number,
  tierless = false,
): Promise<number> {
  return Number(
    await runScript(store, 'reap', [keys.base], {
      limit,
      recordRetentionMs: recordRetentionMs ?? DEFAULT_RECORD_RETENTION_MS,
      tierless: tierless ? 1 : 0,
    }),
  )
}
