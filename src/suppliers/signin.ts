// Supplier identity: a single-use nonce (5 minutes, in Redis), then a signed EIP-4361 message
// checked against the gateway's own URL (siwe.ts) and turned into a `sup_` key by one script
// (lua/supplier-signin.lua): nonce used up, supplier found or created for the wallet, key minted.
import { generateSiweNonce } from 'viem/siwe'
import type { Keyspace } from '../redis/keys.ts'
import { MinuteFuse } from '../redis/minute-fuse.ts'
import { SupplierCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { clientNonceFuseBlown, nonceFuseBlown, nonceRefused, supplierKeyCap } from './results.ts'
import { verifySignIn } from './siwe.ts'
import { newSupplierId } from './store.ts'
import { generateSupplierKey, MAX_ACTIVE_SUPPLIER_KEYS } from './supplier-keys.ts'

export const NONCE_TTL_MS = 5 * 60_000
const SIGNIN_ATTEMPTS = 2

export interface SignInResult {
  supplierId: string
  wallet: string
  /** Shown once. */
  apiKey: string
  keyId: string
  keyPrefix: string
  created: boolean
  /** At the cap: the oldest key a sign-in minted, revoked to make room (else null). */
  replacedKeyId: string | null
}

export class SignInService {
  private readonly fuse: MinuteFuse
  private readonly clientFuse: MinuteFuse

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    private readonly publicUrl: string,
    noncesPerMinute: number,
    private readonly nonceTtlMs = NONCE_TTL_MS,
    noncesPerClientPerMinute = noncesPerMinute,
  ) {
    // Anyone may ask for a nonce: the fuse bounds how many can stand in Redis at once, and the
    // per-client count in front of it keeps one client from taking the whole fuse.
    this.fuse = new MinuteFuse(store, keys.siweNonceFuse, noncesPerMinute, nonceFuseBlown)
    this.clientFuse = new MinuteFuse(
      store,
      keys.siweNonceClientFuse,
      noncesPerClientPerMinute,
      clientNonceFuseBlown,
    )
  }

  /** A fresh nonce for `client` (its address; '' when unknown, one count for all of those). */
  async nonce(client = ''): Promise<string> {
    await this.clientFuse.take(client)
    await this.fuse.take()
    const nonce = generateSiweNonce()
    await this.store.set(this.keys.siweNonce(nonce), '1', 'PX', this.nonceTtlMs)
    return nonce
  }

  async signIn(message: string, signature: string, now = new Date()): Promise<SignInResult> {
    const { wallet, nonce } = await verifySignIn(message, signature, this.publicUrl, now)
    for (let attempt = 0; ; attempt++) {
      const key = generateSupplierKey()
      const reply = (await runScript(this.store, 'supplierSignin', [this.keys.base], {
        nonce,
        wallet,
        walletLower: wallet.toLowerCase(),
        supplierId: newSupplierId(),
        keyId: key.id,
        keyDigest: key.digest,
        keyPrefix: key.prefix,
        keyName: 'signin',
        maxKeys: MAX_ACTIVE_SUPPLIER_KEYS,
      })) as (string | number)[]
      const code = Number(reply[0])
      if (code === SupplierCode.Ok) {
        return {
          supplierId: String(reply[1]),
          wallet,
          apiKey: key.plaintext,
          keyId: key.id,
          keyPrefix: key.prefix,
          created: Number(reply[2]) === 1,
          replacedKeyId: reply[3] ? String(reply[3]) : null,
        }
      }
      if (code === SupplierCode.Refused) throw nonceRefused()
      if (code === SupplierCode.KeyCap) throw supplierKeyCap()
      if (attempt + 1 >= SIGNIN_ATTEMPTS) throw new Error(`supplier-signin answered ${code}`)
    }
  }
}
