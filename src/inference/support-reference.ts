// Support references: opaque, unguessable, short. `sr_` and 20 base32 characters (100 bits).
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567'

export function newSupportReference(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(20))
  let out = 'sr_'
  for (const byte of bytes) out += ALPHABET[byte & 31]
  return out
}

export const SUPPORT_REFERENCE = /^sr_[a-z2-7]{20}$/
