// What an API key is: `svc_` and 32 random bytes in base64url (43 characters). Only its SHA-256
// digest is stored; the plaintext exists in memory at mint and in the mint response, nowhere else.
import { randomBytes, randomUUID } from 'node:crypto'
import { MICROS_PER_UNIT, parseMicros } from '../money/units.ts'

export const API_KEY_PREFIX = 'svc_'
/** `keyPrefix` on the wire: enough to tell keys apart in a list, far too little to guess one. */
export const KEY_PREFIX_LENGTH = 12
export const MAX_ACTIVE_API_KEYS = 10
export const KEY_NAME_MAX = 64
/**
 * A name or label the gateway shows back: min to max characters counted as Unicode code points (a
 * JSON string's length counts UTF-16 units), and never a lone surrogate, which is no character and
 * would be stored as U+FFFD, not as the text the answer gave. No control characters (it is printed
 * in logs, terminals and pages), line separators or bidirectional overrides and isolates (which
 * would show a text other than the one stored). The same with the `u` flag (JSON Schema
 * validators) as without it (TypeBox): the last branch matches only there, the pair only here.
 */
export const shownTextPattern = (min: number, max: number) =>
  `^(?:[\\u0020-\\u007E\\u00A0-\\u2027\\u202F-\\u2065\\u206A-\\uD7FF\\uE000-\\uFFFF]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]|[^\\u0000-\\uFFFF]){${min},${max}}$`

/** A key's name: 1 to KEY_NAME_MAX characters, as shownTextPattern says. */
export const KEY_NAME_PATTERN = shownTextPattern(1, KEY_NAME_MAX)

const RANDOM_BYTES = 32
// Keys we mint are 43 characters after the prefix; longer ones are allowed for a future format,
// but a cap keeps a hostile header from costing a large hash.
const KEY_SHAPE = /^svc_[A-Za-z0-9_-]{43,128}$/

export interface NewApiKey {
  id: string
  plaintext: string
  digest: string
  prefix: string
}

/** A new key: `prefix` (`svc_` for buyers, `sup_` for suppliers) and 32 random bytes. */
export function generateApiKey(prefix = API_KEY_PREFIX): NewApiKey {
  const plaintext = `${prefix}${randomBytes(RANDOM_BYTES).toString('base64url')}`
  return { id: randomUUID(), plaintext, digest: digestApiKey(plaintext), prefix: keyPrefix(plaintext) }
}

/** SHA-256 hex: what Redis stores and looks keys up by (Bun's one-shot hash: no Hash object per request). */
export function digestApiKey(plaintext: string): string {
  return Bun.SHA256.hash(plaintext, 'hex') as string
}

export function keyPrefix(plaintext: string): string {
  return plaintext.slice(0, KEY_PREFIX_LENGTH)
}

/** True when the string has the shape of a key; anything else is refused before Redis is asked. */
export function looksLikeApiKey(value: string): boolean {
  return KEY_SHAPE.test(value)
}

/** A key's spending limit on the wire: a USDC decimal string, at most 6 decimals ("5", "2.000000"). */
export const LIMIT_USDC_PATTERN = '^[0-9]{1,7}(\\.[0-9]{1,6})?$'
const LIMIT_USDC = new RegExp(LIMIT_USDC_PATTERN)

/** The highest spending limit a key may have: 1,000,000 USDC, the most one credit adds. */
export const MAX_LIMIT = 1_000_000 * MICROS_PER_UNIT

/** micro-USDC of a limit (zero allowed: a key that may spend nothing more), or null when malformed or above MAX_LIMIT. */
export function parseLimitUsdc(text: string): number | null {
  if (!LIMIT_USDC.test(text)) return null
  const micros = parseMicros(text)
  return micros !== null && micros <= MAX_LIMIT ? micros : null
}
