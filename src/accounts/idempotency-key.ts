// An Idempotency-Key, as the requests that move money take one (a supplier's payout, an operator's
// hand credit): the same key again answers what the first did, and moves nothing more. Kept in
// Redis as its SHA-256 digest: any visible text fits one key name.
import { createHash } from 'node:crypto'
import { badRequest } from '../errors.ts'

/** 1 to 255 visible ASCII characters. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7E]{1,255}$/

export const digestIdempotencyKey = (key: string) => createHash('sha256').update(key).digest('hex')

/** The key's digest; a 400 (invalid_idempotency_key) for one not of 1 to 255 visible characters. */
export function checkedIdempotencyDigest(key: string): string {
  if (!IDEMPOTENCY_KEY.test(key)) {
    throw badRequest(
      'the Idempotency-Key must be 1 to 255 visible ASCII characters',
      'invalid_idempotency_key',
    )
  }
  return digestIdempotencyKey(key)
}
