// Supplier keys: the sign-in mints the first (lua/supplier-signin.lua); more are minted, listed,
// revoked and resolved as an account's API keys are (OwnedKeys), on the supplier's own hashes.
import { type NewKey, type OwnedKeyRecord, OwnedKeys } from '../accounts/owned-keys.ts'
import type { Keyspace } from '../redis/keys.ts'
import { AccountCode } from '../redis/result-codes.ts'
import type { Store } from '../redis/store.ts'
import { supplierKeyCap, supplierKeyNotFound, supplierKeyRevoked } from './results.ts'
import { MAX_ACTIVE_SUPPLIER_KEYS, SUPPLIER_KEY_PREFIX } from './supplier-keys.ts'

export type SupplierKeyRecord = OwnedKeyRecord<'supplierId'>
export type MintedSupplierKey = NewKey

export class SupplierKeyStore {
  private readonly owned: OwnedKeys<'supplierId'>

  constructor(store: Store, keys: Keyspace) {
    this.owned = new OwnedKeys(store, {
      field: 'supplierId',
      keyPrefix: SUPPLIER_KEY_PREFIX,
      cap: MAX_ACTIVE_SUPPLIER_KEYS,
      ownerHash: keys.supplier,
      ownerKeys: keys.supplierKeys,
      keyByDigest: keys.supplierKey,
      apart: false,
    })
  }

  /**
   * A new key for the supplier. `callerKeyId`: the key asking, if any (a sign-in mints with none); one
   * revoked since its request was authenticated mints nothing (401).
   */
  async mint(supplierId: string, name: string, callerKeyId = ''): Promise<MintedSupplierKey> {
    const minted = await this.owned.mint(supplierId, name, null, callerKeyId)
    if (!('refused' in minted)) return minted
    if (minted.refused === AccountCode.KeyCap) throw supplierKeyCap()
    if (minted.refused === AccountCode.CallerRevoked) throw supplierKeyRevoked()
    throw new Error(`mint-key answered ${minted.refused} for a supplier`)
  }

  /** The supplier's active keys, oldest first. */
  list(supplierId: string): Promise<SupplierKeyRecord[]> {
    return this.owned.list(supplierId)
  }

  /**
   * Revokes one of the supplier's own keys; an unknown or another supplier's id is a 404, a
   * `callerKeyId` revoked since its request was authenticated a 401.
   */
  async revoke(supplierId: string, keyId: string, callerKeyId = ''): Promise<void> {
    const code = await this.owned.revoke(supplierId, keyId, callerKeyId)
    if (code === AccountCode.CallerRevoked) throw supplierKeyRevoked()
    if (code !== AccountCode.Ok) throw supplierKeyNotFound()
  }

  resolve(digest: string): Promise<SupplierKeyRecord | null> {
    return this.owned.resolve(digest)
  }

  touch(digest: string): Promise<void> {
    return this.owned.touch(digest)
  }
}
