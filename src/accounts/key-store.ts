// API keys of an account (OwnedKeys, owned-keys.ts) with what only they have: a spending limit
// (lifetime, or reset daily, weekly or monthly: budget-periods.ts), and the spent and held beside it
// on the account's hash. A limit, its reset or a name is set by lua/set-key-limit.lua; a limited
// caller's budget binds what it mints, changes and revokes.

import { redisNow } from '../redis/clock.ts'
import type { Keyspace } from '../redis/keys.ts'
import { AccountCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { API_KEY_PREFIX, MAX_ACTIVE_API_KEYS } from './api-keys.ts'
import { currentPeriod, isLimitReset, type LimitReset, periodEnd } from './budget-periods.ts'
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
  /** how often the limit resets; null: a lifetime limit (or none) */
  reset: LimitReset | null
  /** charged through the key in its current period (0 without a periodic limit) */
  periodSpent: number
  /** when the current period ends, ms; null without a periodic limit */
  resetsAt: number | null
}

export type ApiKeyWithSpending = ApiKeyRecord & KeySpending

/** What PATCH /v1/agent/keys/{id} changes: a limit (null removes it), its reset, a name. */
export interface KeyChange {
  limit?: number | null
  /** null: the limit becomes a lifetime one */
  reset?: LimitReset | null
  name?: string
}

export interface MintedApiKey extends NewKey, KeySpending {}

export class ApiKeyStore {
  private readonly owned: OwnedKeys<'accountId'>

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
  ) {
    this.owned = new OwnedKeys(store, {
      field: 'accountId',
      keyPrefix: API_KEY_PREFIX,
      cap: MAX_ACTIVE_API_KEYS,
      ownerHash: keys.account,
      ownerKeys: keys.accountKeys,
      keyByDigest: keys.apiKey,
      apart: keys.layout === 'apart',
    })
  }

  /**
   * A new key, with a spending limit in micro-USDC when given, reset as `reset` says (null: a
   * lifetime limit). `callerKeyId` is the key asking, if any: a limited caller must give a limit
   * within what it has left, whose every period holds whole periods of its own, and that much
   * leaves its own.
   */
  async mint(
    accountId: string,
    name: string,
    limit: number | null = null,
    callerKeyId = '',
    reset: LimitReset | null = null,
  ): Promise<MintedApiKey> {
    const minted = await this.owned.mint(accountId, name, limit, callerKeyId, reset ?? '')
    if ('refused' in minted) throw accountResultError(minted.refused)
    const period = reset === null ? null : currentPeriod(reset, null, null, await redisNow(this.store))
    return { ...minted, limit, spent: 0, held: 0, reset, periodSpent: 0, resetsAt: period?.resetsAt ?? null }
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

  /**
   * Each key's limit, spent and held, from the account hash's limit:/spent:/held:<keyId> fields,
   * and a periodic limit's current period from reset:/pstart:/pspent:<keyId> at Redis's time.
   */
  async spending(accountId: string, keyIds: string[]): Promise<KeySpending[]> {
    if (keyIds.length === 0) return []
    const FIELDS = ['limit', 'spent', 'held', 'reset', 'pstart', 'pspent']
    const fields = keyIds.flatMap((id) => FIELDS.map((field) => `${field}:${id}`))
    const [values, now] = await Promise.all([
      this.store.hmget(this.keys.account(accountId), ...fields),
      redisNow(this.store),
    ])
    return keyIds.map((_, i) => {
      const [limit, spent, held, reset, pstart, pspent] = values.slice(
        FIELDS.length * i,
        FIELDS.length * (i + 1),
      )
      const kind = isLimitReset(reset) ? reset : null
      const period = kind === null ? null : currentPeriod(kind, pstart, pspent, now)
      return {
        limit: limit == null ? null : Number(limit),
        spent: Number(spent ?? 0),
        held: Number(held ?? 0),
        reset: kind,
        periodSpent: period?.periodSpent ?? 0,
        resetsAt: period?.resetsAt ?? null,
      }
    })
  }

  /**
   * Sets one of the account's own keys' limit (micro-USDC; null removes it, and its reset), how
   * often it resets, and/or its name. An unknown or another account's id is a 404; a limit below
   * what the key spent (in its period) and holds is a 409; a limited `callerKeyId` raising or
   * removing any limit, or changing its reset, is a 403; a reset left without a limit is a 400.
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
    const resetArg = change.reset === undefined ? '' : change.reset === null ? 'none' : change.reset
    const apart = this.keys.layout === 'apart'
    const ownKeys = [this.keys.account(accountId), this.keys.accountKeys(accountId)]
    const reply = (await runScript(
      this.store,
      'setKeyLimit',
      apart ? ownKeys : [...ownKeys, this.keys.apiKey(digest)],
      {
        keyId,
        keyDigest: digest,
        limit: limitArg,
        name: change.name ?? '',
        callerKeyId,
        limitReset: resetArg,
        now: '',
      },
    )) as (string | number)[]
    const code = Number(reply[0])
    if (code === AccountCode.LimitBelowSpent) throw limitBelowSpent(Number(reply[1]))
    if (code !== AccountCode.Ok) throw accountResultError(code)
    // Held apart, the name is on the record's slot: a step of its own (lua/rename-key.lua).
    if (apart && change.name)
      await runScript(this.store, 'renameKey', [this.keys.apiKey(digest)], { keyName: change.name })
    const record = await this.resolve(digest)
    // Revoked between the change and this read: as if it had been revoked first.
    if (!record) throw accountResultError(AccountCode.NoKey)
    const reset = isLimitReset(reply[4]) ? reply[4] : null
    return {
      ...record,
      limit: reply[1] === '' ? null : Number(reply[1]),
      spent: Number(reply[2]),
      held: Number(reply[3]),
      reset,
      periodSpent: Number(reply[5]),
      resetsAt: reset === null ? null : periodEnd(reset, Number(reply[6])),
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

  /**
   * Refuses a key with a spending limit (403 key_limit_binding): the account's own settings (its max
   * price, its webhook endpoints) are changed by a key without one, so an agent given a budget can
   * neither raise what every key pays nor silence the alerts its owner set.
   */
  async requireUnlimited(accountId: string, keyId: string): Promise<void> {
    if ((await this.store.hget(this.keys.account(accountId), `limit:${keyId}`)) !== null) {
      throw accountResultError(AccountCode.KeyLimitBinding)
    }
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
