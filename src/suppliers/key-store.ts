// Supplier keys in Redis: the sign-in mints the first (lua/supplier-signin.lua); more are minted
// under the same cap by lua/mint-key.lua, revoked by lua/revoke-key.lua and touched by
// lua/touch-key.lua, the buyer keys' scripts, on the supplier's own hashes. Resolving a key is one
// HGETALL by digest: no cache to outlive a revoke.
import type Redis from 'ioredis'
import type { Keyspace } from '../redis/keys.ts'
import { AccountCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import { supplierKeyCap, supplierKeyNotFound } from './results.ts'
import { generateSupplierKey, MAX_ACTIVE_SUPPLIER_KEYS } from './supplier-keys.ts'

export interface SupplierKeyRecord {
  id: string
  supplierId: string
  name: string
  prefix: string
  createdAt: number
  lastUsedAt: number | null
}

export interface MintedSupplierKey {
  id: string
  /** The plaintext: returned to the caller once, never stored, never logged. */
  apiKey: string
  name: string
  keyPrefix: string
}

const MINT_ATTEMPTS = 2

function toRecord(raw: Record<string, string>): SupplierKeyRecord | null {
  if (!raw.id || !raw.supplierId) return null
  return {
    id: raw.id,
    supplierId: raw.supplierId,
    name: raw.name ?? '',
    prefix: raw.prefix ?? '',
    createdAt: Number(raw.createdAt),
    lastUsedAt: raw.lastUsedAt ? Number(raw.lastUsedAt) : null,
  }
}

export class SupplierKeyStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keyspace,
  ) {}

  async mint(supplierId: string, name: string): Promise<MintedSupplierKey> {
    for (let attempt = 0; ; attempt++) {
      const key = generateSupplierKey()
      const code = Number(
        await runScript(
          this.redis,
          'mintKey',
          [
            this.keys.supplier(supplierId),
            this.keys.supplierKeys(supplierId),
            this.keys.supplierKey(key.digest),
          ],
          [supplierId, key.id, key.digest, name, key.prefix, MAX_ACTIVE_SUPPLIER_KEYS, '', 'supplierId'],
        ),
      )
      if (code === AccountCode.Ok) return { id: key.id, apiKey: key.plaintext, name, keyPrefix: key.prefix }
      if (code === AccountCode.KeyCap) throw supplierKeyCap()
      if (code !== AccountCode.IdTaken || attempt + 1 >= MINT_ATTEMPTS) {
        throw new Error(`mint-key answered ${code} for a supplier`)
      }
    }
  }

  /** The supplier's active keys, oldest first. */
  async list(supplierId: string): Promise<SupplierKeyRecord[]> {
    const digests = Object.values(await this.redis.hgetall(this.keys.supplierKeys(supplierId)))
    const raws = await Promise.all(digests.map((digest) => this.redis.hgetall(this.keys.supplierKey(digest))))
    return raws
      .map(toRecord)
      .filter((record): record is SupplierKeyRecord => record !== null)
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))
  }

  /** Revokes one of the supplier's own keys; an unknown or another supplier's id is a 404. */
  async revoke(supplierId: string, keyId: string): Promise<void> {
    const own = this.keys.supplierKeys(supplierId)
    const digest = await this.redis.hget(own, keyId)
    if (!digest) throw supplierKeyNotFound()
    const code = Number(
      await runScript(
        this.redis,
        'revokeKey',
        [own, this.keys.supplierKey(digest), this.keys.supplier(supplierId)],
        [keyId, digest, ''],
      ),
    )
    if (code !== AccountCode.Ok) throw supplierKeyNotFound()
  }

  async resolve(digest: string): Promise<SupplierKeyRecord | null> {
    return toRecord(await this.redis.hgetall(this.keys.supplierKey(digest)))
  }

  async touch(digest: string): Promise<void> {
    await runScript(this.redis, 'touchKey', [this.keys.supplierKey(digest)], [])
  }
}
