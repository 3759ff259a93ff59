// API keys in Redis: mint (under the cap, in lua/mint-key.lua), list, set a key's spending limit
// or name (lua/set-key-limit.lua), revoke (lua/revoke-key.lua) and resolve, which is one HGETALL by digest so that a revoked key fails on the very next request
// on every replica: there is no cache of key -> account to outlive a revoke.
import type Redis from 'ioredis'
import type { Keyspace } from '../redis/keys.ts'
import { AccountCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import { generateApiKey, MAX_ACTIVE_API_KEYS } from './api-keys.ts'
import { accountResultError, limitBelowSpent } from './results.ts'

export interface ApiKeyRecord {
  id: string
  accountId: string
  name: string
  prefix: string
  createdAt: number
  lastUsedAt: number | null
}

/** A key's spending: micro-USDC, kept on its account's hash (they outlive a revoke). */
export interface KeySpending {
  /** null: no limit */
  limit: number | null
  /** charged through the key, ever */
  spent: number
  /** held by its requests in flight */
  held: number
}

export type ApiKeyWithSpending = ApiKeyRecord & KeySpending

/** What PATCH /v1/agent/keys/{id} changes: a limit (null removes it), a name, or both. */
export interface KeyChange {
  limit?: number | null
  name?: string
}

export interface MintedApiKey extends KeySpending {
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

  /**
   * A new key, with a spending limit in micro-USDC when given. `callerKeyId` is the key asking, if
   * any: a limited caller must give a limit within what it has left, and that much leaves its own.
   */
  async mint(
    accountId: string,
    name: string,
    limit: number | null = null,
    callerKeyId = '',
  ): Promise<MintedApiKey> {
    for (let attempt = 0; ; attempt++) {
      const key = generateApiKey()
      const code = Number(
        await runScript(
          this.redis,
          'mintKey',
          [this.keys.account(accountId), this.keys.accountKeys(accountId), this.keys.apiKey(key.digest)],
          [
            accountId,
            key.id,
            key.digest,
            name,
            key.prefix,
            MAX_ACTIVE_API_KEYS,
            limit ?? '',
            '',
            callerKeyId,
          ],
        ),
      )
      if (code === AccountCode.Ok) {
        return { id: key.id, apiKey: key.plaintext, name, keyPrefix: key.prefix, limit, spent: 0, held: 0 }
      }
      if (code !== AccountCode.IdTaken || attempt + 1 >= MINT_ATTEMPTS) throw accountResultError(code)
    }
  }

  /** The account's active keys, oldest first, with their spending: the plaintext is not stored. */
  async list(accountId: string): Promise<ApiKeyWithSpending[]> {
    const digests = Object.values(await this.redis.hgetall(this.keys.accountKeys(accountId)))
    // Auto-pipelining sends these together: one round trip however many keys.
    const raws = await Promise.all(digests.map((digest) => this.redis.hgetall(this.keys.apiKey(digest))))
    const records = raws
      .map(toRecord)
      .filter((record): record is ApiKeyRecord => record !== null)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))
    const spending = await this.spending(
      accountId,
      records.map((r) => r.id),
    )
    return records.map((record, i) => ({ ...record, ...spending[i]! }))
  }

  /** Each key's limit, spent and held, from the account hash's limit:/spent:/held:<keyId> fields. */
  async spending(accountId: string, keyIds: string[]): Promise<KeySpending[]> {
    if (keyIds.length === 0) return []
    const fields = keyIds.flatMap((id) => [`limit:${id}`, `spent:${id}`, `held:${id}`])
    const values = await this.redis.hmget(this.keys.account(accountId), ...fields)
    return keyIds.map((_, i) => ({
      limit: values[3 * i] == null ? null : Number(values[3 * i]),
      spent: Number(values[3 * i + 1] ?? 0),
      held: Number(values[3 * i + 2] ?? 0),
    }))
  }

  /**
   * Sets one of the account's own keys' limit (micro-USDC; null removes it) and/or name. An unknown
   * or another account's id is a 404; a limit below what the key spent and holds is a 409; a
   * limited `callerKeyId` raising or removing any limit is a 403.
   */
  async change(
    accountId: string,
    keyId: string,
    change: KeyChange,
    callerKeyId = '',
  ): Promise<ApiKeyWithSpending> {
    const accountKeys = this.keys.accountKeys(accountId)
    const digest = await this.redis.hget(accountKeys, keyId)
    if (!digest) throw accountResultError(AccountCode.NoKey)
    const limitArg = change.limit === undefined ? '' : change.limit === null ? 'none' : change.limit
    const reply = (await runScript(
      this.redis,
      'setKeyLimit',
      [this.keys.account(accountId), accountKeys, this.keys.apiKey(digest)],
      [keyId, digest, limitArg, change.name ?? '', callerKeyId],
    )) as (string | number)[]
    const code = Number(reply[0])
    if (code === AccountCode.LimitBelowSpent) throw limitBelowSpent(Number(reply[1]))
    if (code !== AccountCode.Ok) throw accountResultError(code)
    const record = await this.resolve(digest)
    // Revoked between the change and this read: as if it had been revoked first.
    if (!record) throw accountResultError(AccountCode.NoKey)
    return {
      ...record,
      limit: reply[1] === '' ? null : Number(reply[1]),
      spent: Number(reply[2]),
      held: Number(reply[3]),
    }
  }

  count(accountId: string): Promise<number> {
    return this.redis.hlen(this.keys.accountKeys(accountId))
  }

  /**
   * Revokes one of the account's own keys; an unknown or another account's id is a 404. A limited
   * `callerKeyId` revoking a key without a limit is a 403.
   */
  async revoke(accountId: string, keyId: string, callerKeyId = ''): Promise<void> {
    const accountKeys = this.keys.accountKeys(accountId)
    const digest = await this.redis.hget(accountKeys, keyId)
    if (!digest) throw accountResultError(AccountCode.NoKey)
    const code = Number(
      await runScript(
        this.redis,
        'revokeKey',
        [accountKeys, this.keys.apiKey(digest), this.keys.account(accountId)],
        [keyId, digest, callerKeyId],
      ),
    )
    if (code !== AccountCode.Ok) throw accountResultError(code)
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
