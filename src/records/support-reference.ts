// Support references: opaque, unguessable, short. `sr_` and 20 base32 characters (100 bits).
import type { ApiError } from '../errors.ts'

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567'

export function newSupportReference(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(20))
  let out = 'sr_'
  for (let i = 0; i < bytes.length; i++) out += ALPHABET[bytes[i]! & 31]
  return out
}

export const SUPPORT_REFERENCE = /^sr_[a-z2-7]{20}$/

export const SUPPORT_REFERENCE_HEADER = 'x-svc-support-reference'

/** Puts the support reference of a recorded attempt on an error: in its header and its body. */
export function attachSupportReference(error: ApiError, supportReference: string): ApiError {
  error.headers[SUPPORT_REFERENCE_HEADER] = supportReference
  error.extra.supportReference = supportReference
  return error
}
