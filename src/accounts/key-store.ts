// API keys of an account (OwnedKeys, owned-keys.ts) with what only they have: a spending limit, and
// the spent and held beside it on the account's hash. A limit or name is set by
// lua/set-key-limit.lua; a limited caller's budget binds what it mints, changes and revokes.
import type Redis from 'ioredis'
import type { Keyspace } from '../redis/keys.ts'
import { AccountCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import { API_KEY_PREFIX, MAX_ACTIVE_API_KEYS } from './api-keys.ts'
import { type NewKey, type OwnedKeyRecord, OwnedKeys } from './owned-keys.ts'
import { accountResultError, limitBelowSpent } from './results.ts'

export type ApiKeyRecord = OwnedKeyRecord<'accountId'>
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

export interface MintedApiKey extends NewKey, KeySpending {}

export class ApiKeyStore {
  private readonly owned: OwnedKeys<'accountId'>

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keyspace,
  ) {
    this.owned = new OwnedKeys(redis, {
      field: 'accountId',
      keyPrefix: API_KEY_PREFIX,
      cap: MAX_ACTIVE_API_KEYS,
      ownerHash: keys.account,
      ownerKeys: keys.accountKeys,
      keyByDigest: keys.apiKey,
    })
  }

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
    const minted = await this.owned.mint(accountId, name, limit, callerKeyId)
    if ('refused' in minted) throw accountResultError(minted.refused)
    return { ...minted, limit, spent: 0, held: 0 }
  }

  /** The account's active keys, oldest first, with their spending: the plaintext is not stored. */
  async list(accountId: string): Promise<ApiKeyWithSpending[]> {
    const records = await this.owned.list(accountId)
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
    const digest = await this.owned.digestOf(accountId, keyId)
    if (!digest) throw accountResultError(AccountCode.NoKey)
    const limitArg = change.limit === undefined ? '' : change.limit === null ? 'none' : change.limit
    const reply = (await runScript(
      this.redis,
      'setKeyLimit',
      [this.keys.account(accountId), this.keys.accountKeys(accountId), this.keys.apiKey(digest)],
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
    return this.owned.count(accountId)
  }

  /**
   * Revokes one of the account's own keys; an unknown or another account's id is a 404. A limited
   * `callerKeyId` revoking a key without a limit is a 403.
   */
  async revoke(accountId: string, keyId: string, callerKeyId = ''): Promise<void> {
    const code = await this.owned.revoke(accountId, keyId, callerKeyId)
    if (code !== AccountCode.Ok) throw accountResultError(code)
  }

  /** The active key with this digest, or null: one HGETALL, the only Redis read auth makes. */
  resolve(digest: string): Promise<ApiKeyRecord | null> {
    return this.owned.resolve(digest)
  }

  /** Sets lastUsedAt (Redis time) if the key still exists; see last-used.ts for how rarely. */
  touch(digest: string): Promise<void> {
    return this.owned.touch(digest)
  }
}
