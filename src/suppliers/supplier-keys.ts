// What a supplier key is: `sup_` and 32 random bytes in base64url, stored as its SHA-256 digest,
// shown once; made and digested as buyer keys are (accounts/api-keys.ts), told apart by the prefix,
// so neither kind ever opens the other's routes.
import { generateApiKey, type NewApiKey } from '../accounts/api-keys.ts'

export const SUPPLIER_KEY_PREFIX = 'sup_'
export const MAX_ACTIVE_SUPPLIER_KEYS = 10
const KEY_SHAPE = /^sup_[A-Za-z0-9_-]{43,128}$/

export function generateSupplierKey(): NewApiKey {
  return generateApiKey(SUPPLIER_KEY_PREFIX)
}

/** True when the string has the shape of a supplier key; anything else is refused before Redis is asked. */
export function looksLikeSupplierKey(value: string): boolean {
  return KEY_SHAPE.test(value)
}
