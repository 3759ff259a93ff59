// A request refused at admission (402, 429, 503) never had an attempt admitted, so no script ends
// one: its refusal is added to the attempts:ended stream here, as attempt 1, so that the request
// can be resolved by its support reference like any other.
import type Redis from 'ioredis'
import type { Keyspace } from '../redis/keys.ts'

export interface Refusal {
  attemptId: string
  accountId: string
  apiKeyId: string
  requestId: string
  model: string
  /** the contract's error code the buyer got */
  errorCode: string
}

export async function recordRefusal(redis: Redis, keys: Keyspace, refusal: Refusal): Promise<void> {
  await redis.xadd(
    keys.attemptsEnded,
    '*',
    'id',
    refusal.attemptId,
    'state',
    'refused',
    'accountId',
    refusal.accountId,
    'keyId',
    refusal.apiKeyId,
    'requestId',
    refusal.requestId,
    'model',
    refusal.model,
    'errorCode',
    refusal.errorCode,
  )
}
