// API keys in Redis: mint (under the cap, in lua/mint-key.lua), list, revoke (lua/revoke-key.lua)
// and resolve, which is one HGETALL by digest so that a revoked key fails on the very next request
// on every replica: there is no cache of key -> account to outlive a revoke.
import type Redis from 'ioredis'
import type { Keyspace } from '../redis/keys.ts'
import { runScript } from '../redis/scripts.ts'
import { generateApiKey, MAX_ACTIVE_API_KEYS } from './api-keys.ts'
import { AccountResult, accountResultError } from './results.ts'

export interface ApiKeyRecord {
  id: string
  accountId: string
  name: string
  prefix: string
  createdAt: number
  lastUsedAt: number | null
}

export interface MintedApiKey {
  id: string
  /** The plaintext: returned to the caller once, never stored, never logged. */
  apiKey: string
  name: string
  keyPrefix: string
}

// A fresh UUID and 32 random bytes colliding is not going to happen; one retry covers it anyway.
const MINT_ATTEMPTS = 2

function toRecord(raw: Record<string, string>): ApiKeyRecord | null {
  if (!raw.id || !raw.accountId) return null
  return {
    id: raw.id,
    accountId: raw.accountId,
    name: raw.name ?? '',
    prefix: raw.prefix ?? '',
    createdAt: Number(raw.createdAt),
    lastUsedAt: raw.lastUsedAt ? Number(raw.lastUsedAt) : null,
  }
}

export class ApiKeyStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keyspace,
  ) {}

  async mint(accountId: string, name: string): Promise<MintedApiKey> {
    for (let attempt = 0; ; attempt++) {
      const key = generateApiKey()
      const code = Number(
        await runScript(
          this.redis,
          'mintKey',
          [this.keys.account(accountId), this.keys.accountKeys(accountId), this.keys.apiKey(key.digest)],
          [accountId, key.id, key.digest, name, key.prefix, MAX_ACTIVE_API_KEYS],
        ),
      )
      if (code === AccountResult.Ok) return { id: key.id, apiKey: key.plaintext, name, keyPrefix: key.prefix }
      if (code !== AccountResult.IdTaken || attempt + 1 >= MINT_ATTEMPTS) throw accountResultError(code)
    }
  }

  /** The account's active keys, oldest first: metadata only, the plaintext is not stored. */
  async list(accountId: string): Promise<ApiKeyRecord[]> {
    const digests = Object.values(await this.redis.hgetall(this.keys.accountKeys(accountId)))
    // Auto-pipelining sends these together: one round trip however many keys.
    const raws = await Promise.all(digests.map((digest) => this.redis.hgetall(this.keys.apiKey(digest))))
    return raws
      .map(toRecord)
      .filter((record): record is ApiKeyRecord => record !== null)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))
  }

  count(accountId: string): Promise<number> {
    return this.redis.hlen(this.keys.accountKeys(accountId))
  }

  /** Revokes one of the account's own keys; an unknown or another account's id is a 404. */
  async revoke(accountId: string, keyId: string): Promise<void> {
    const accountKeys = this.keys.accountKeys(accountId)
    const digest = await this.redis.hget(accountKeys, keyId)
    if (!digest) throw accountResultError(AccountResult.NoKey)
    const code = Number(
      await runScript(this.redis, 'revokeKey', [accountKeys, this.keys.apiKey(digest)], [keyId, digest]),
    )
    if (code !== AccountResult.Ok) throw accountResultError(code)
  }

  /** The active key with this digest, or null: one HGETALL, the only Redis read auth makes. */
  async resolve(digest: string): Promise<ApiKeyRecord | null> {
    return toRecord(await this.redis.hgetall(this.keys.apiKey(digest)))
  }

  /** Sets lastUsedAt (Redis time) if the key still exists; see last-used.ts for how rarely. */
  async touch(digest: string): Promise<void> {
    await runScript(this.redis, 'touchKey', [this.keys.apiKey(digest)], [])
  }
}
