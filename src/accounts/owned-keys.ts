// Keys in Redis for either owner, an account (`svc_` API keys) or a supplier (`sup_` keys): the same
// scripts on the owner's own hashes. Minted under the owner's cap (lua/mint-key.lua), listed, revoked
// (lua/revoke-key.lua), touched (lua/touch-key.lua), and resolved by one HGETALL by digest, so a
// revoked key fails on the very next request on every replica: no cache outlives a revoke.
import { ACCOUNT_TABLE } from '../redis/keys.ts'
import { AccountCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { generateApiKey } from './api-keys.ts'

/** Whose keys, and where they live. */
export interface KeyOwner<F extends 'accountId' | 'supplierId'> {
  /** The key hash's field naming its owner. */
  field: F
  /** `svc_` or `sup_`. */
  keyPrefix: string
  /** Active keys per owner at most. */
  cap: number
  ownerHash(ownerId: string): string
  ownerKeys(ownerId: string): string
  keyByDigest(digest: string): string
  /**
   * The key records on a slot other than the owner's (a market held apart): each script runs on
   * the owner's keys alone and the record is written (lua/index-key.lua) or deleted in a step of its own.
   */
  apart: boolean
}

export type OwnedKeyRecord<F extends string> = {
  id: string
  name: string
  prefix: string
  createdAt: number
  lastUsedAt: number | null
} & Record<F, string>

/** A key just minted: its plaintext goes to the caller once, never stored, never logged. */
export interface NewKey {
  id: string
  apiKey: string
  name: string
  keyPrefix: string
}

// A fresh UUID and 32 random bytes colliding is not going to happen; one retry covers it anyway.
const MINT_ATTEMPTS = 2

export class OwnedKeys<F extends 'accountId' | 'supplierId'> {
  constructor(
    private readonly store: Store,
    private readonly owner: KeyOwner<F>,
  ) {}

  private toRecord(raw: Record<string, string>): OwnedKeyRecord<F> | null {
    const ownerId = raw[this.owner.field]
    if (!raw.id || !ownerId) return null
    return {
      id: raw.id,
      [this.owner.field]: ownerId,
      name: raw.name ?? '',
      prefix: raw.prefix ?? '',
      createdAt: Number(raw.createdAt),
      lastUsedAt: raw.lastUsedAt ? Number(raw.lastUsedAt) : null,
    } as OwnedKeyRecord<F>
  }

  /**
   * Mints a key: the key, or the script's refusal code. `limit` (micro-USDC, API keys only) and
   * `callerKeyId` (a limited caller's budget binds what it mints) and `reset` (how often the limit
   * resets, '' for never) as lua/mint-key.lua takes them.
   */
  async mint(
    ownerId: string,
    name: string,
    limit: number | null = null,
    callerKeyId = '',
    reset = '',
  ): Promise<NewKey | { refused: number }> {
    const { owner } = this
    for (let attempt = 0; ; attempt++) {
      const key = generateApiKey(owner.keyPrefix)
      const ownKeys = [owner.ownerHash(ownerId), owner.ownerKeys(ownerId)]
      let code = Number(
        await runScript(
          this.store,
          'mintKey',
          owner.apart ? ownKeys : [...ownKeys, owner.keyByDigest(key.digest)],
          {
            accountId: ownerId,
            keyId: key.id,
            keyDigest: key.digest,
            keyName: name,
            keyPrefix: key.prefix,
            maxKeys: owner.cap,
            limit: limit ?? '',
            owner: owner.field,
            callerKeyId,
            limitReset: reset,
            // An account made without its table field becomes a table here; no request reads a
            // supplier's hash.
            table: owner.field === 'accountId' ? ACCOUNT_TABLE : '',
          },
        ),
      )
      if (code === AccountCode.Ok && owner.apart)
        code = await this.index(ownerId, key.id, key.digest, name, key.prefix)
      if (code === AccountCode.Ok) return { id: key.id, apiKey: key.plaintext, name, keyPrefix: key.prefix }
      if (code !== AccountCode.IdTaken || attempt + 1 >= MINT_ATTEMPTS) return { refused: code }
    }
  }

  /**
   * The record auth reads, for a key minted on its owner's slot (a market held apart). A digest
   * already another key's (never in practice: 32 random bytes) unlists the key just minted.
   */
  async index(
    ownerId: string,
    keyId: string,
    digest: string,
    name: string,
    keyPrefix: string,
  ): Promise<number> {
    const code = Number(
      await runScript(this.store, 'indexKey', [this.owner.keyByDigest(digest)], {
        keyId,
        owner: this.owner.field,
        ownerId,
        keyName: name,
        keyPrefix,
      }),
    )
    if (code !== AccountCode.Ok) await this.unlist(ownerId, keyId, digest, '')
    return code
  }

  /** The owner's active keys, oldest first: the plaintext is not stored. */
  async list(ownerId: string): Promise<OwnedKeyRecord<F>[]> {
    const digests = Object.values(await this.store.hgetall(this.owner.ownerKeys(ownerId)))
    // Auto-pipelining sends these together: one round trip however many keys.
    const raws = await Promise.all(
      digests.map((digest) => this.store.hgetall(this.owner.keyByDigest(digest))),
    )
    return raws
      .map((raw) => this.toRecord(raw))
      .filter((record): record is OwnedKeyRecord<F> => record !== null)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))
  }

  /** The digest of one of the owner's own keys, or null (unknown, another owner's, revoked). */
  digestOf(ownerId: string, keyId: string): Promise<string | null> {
    return this.store.hget(this.owner.ownerKeys(ownerId), keyId)
  }

  /** Revokes one of the owner's own keys: the script's code (Ok, or why not); NoKey when not its own. */
  async revoke(ownerId: string, keyId: string, callerKeyId = ''): Promise<number> {
    const digest = await this.digestOf(ownerId, keyId)
    if (!digest) return AccountCode.NoKey
    if (!this.owner.apart) {
      const keys = [
        this.owner.ownerKeys(ownerId),
        this.owner.ownerHash(ownerId),
        this.owner.keyByDigest(digest),
      ]
      return Number(await runScript(this.store, 'revokeKey', keys, { keyId, keyDigest: digest, callerKeyId }))
    }
    // Held apart: the record goes first, so the key stops working before it is unlisted (a replica
    // that stops between the two leaves a listed key that no longer works, revoked again at will);
    // one the owner's step refuses for its caller's limit is recorded again. Not one it finds gone:
    // a revoke of the same key beside this one unlisted it.
    // A revoke the owner's step would refuse for its caller's limit is refused before the record is
    // taken, so a limited key's refused revokes never stop the key working meanwhile. The step
    // still decides: a limit set or lifted in between is caught below.
    if (callerKeyId && (await this.limitBinds(ownerId, keyId, callerKeyId)))
      return AccountCode.KeyLimitBinding
    const lookup = this.owner.keyByDigest(digest)
    // Read and deleted in one step: a refused revoke puts back exactly what it took itself, never
    // what another revoke put back meanwhile.
    const [[, taken]] = (await this.store.multi().hgetall(lookup).del(lookup).exec()) as [
      [unknown, Record<string, string> | null],
    ]
    const code = await this.unlist(ownerId, keyId, digest, callerKeyId)
    if (code === AccountCode.Ok) {
      // A refused revoke beside this one may have put the record back since this one took it.
      await this.store.del(lookup)
    } else if (
      (code === AccountCode.KeyLimitBinding || code === AccountCode.CallerRevoked) &&
      taken?.id === keyId
    ) {
      await this.store.hset(lookup, taken)
      // Unlisted meanwhile by a revoke that was allowed: its record must not outlive it.
      if ((await this.digestOf(ownerId, keyId)) !== digest) await this.store.del(lookup)
    }
    return code
  }

  /** revoke-key's rule for a limited caller: a key without a limit is not its to revoke. */
  private async limitBinds(ownerId: string, keyId: string, callerKeyId: string): Promise<boolean> {
    const [callerLimit, keyLimit] = await this.store.hmget(
      this.owner.ownerHash(ownerId),
      `limit:${callerKeyId}`,
      `limit:${keyId}`,
    )
    return callerLimit !== null && keyLimit === null
  }

  /** revoke-key's step on the owner's own keys alone: the key is no longer the owner's. */
  private async unlist(ownerId: string, keyId: string, digest: string, callerKeyId: string): Promise<number> {
    const keys = [this.owner.ownerKeys(ownerId), this.owner.ownerHash(ownerId)]
    return Number(await runScript(this.store, 'revokeKey', keys, { keyId, keyDigest: digest, callerKeyId }))
  }

  count(ownerId: string): Promise<number> {
    return this.store.hlen(this.owner.ownerKeys(ownerId))
  }

  /** The active key with this digest, or null: one HGETALL, the only Redis read auth makes. */
  async resolve(digest: string): Promise<OwnedKeyRecord<F> | null> {
    return this.toRecord(await this.store.hgetall(this.owner.keyByDigest(digest)))
  }

  /** Sets lastUsedAt (Redis time) if the key still exists; see last-used.ts for how rarely. */
  async touch(digest: string): Promise<void> {
    await runScript(this.store, 'touchKey', [this.owner.keyByDigest(digest)], {})
  }
}
