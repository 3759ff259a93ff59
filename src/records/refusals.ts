// A request refused at admission (402, 403, 429, 503) never had an attempt admitted, so no script
// ends one: lua/refuse.lua writes its refusal as an ended attempt of its own (state `refused`), so
// that the request can be resolved by its support reference like any other and goes on the
// ended-attempt Streams. No money moves.
import type { Keyspace } from '../redis/keys.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'

/** What the scripts keep an ended attempt for when not told (SVC_RECORD_RETENTION_DAYS's default). */
export const DEFAULT_RECORD_RETENTION_MS = 30 * 86_400_000

export interface Refusal {
  /** `<support reference>.<n>`: the attempt that admission refused */
  attemptId: string
  accountId: string
  apiKeyId: string
  requestId: string
  model: string
  /** the contract's error code the buyer got */
  errorCode: string
}

export async function recordRefusal(
  store: Store,
  keys: Keyspace,
  refusal: Refusal,
  retentionMs: number,
): Promise<void> {
  await runScript(store, 'refuse', [keys.base], {
    attemptId: refusal.attemptId,
    accountId: refusal.accountId,
    apiKeyId: refusal.apiKeyId,
    requestId: refusal.requestId,
    model: refusal.model,
    errorCode: refusal.errorCode,
    recordRetentionMs: retentionMs,
  })
}
