// Sign-In with Ethereum (EIP-4361), checked with viem's siwe helpers against the gateway's own
// public URL (config SVC_PUBLIC_URL, never a request's Host header). Every check here is
// stateless; the nonce is used up afterwards, in the script that signs the supplier in, so a
// refused message leaves it usable.
import type { Address, Hex } from 'viem'
import { parseSiweMessage } from 'viem/siwe'
import { getAddress, isHex, recoverMessageAddress } from 'viem/utils'
import { ApiError, badRequest } from '../errors.ts'

export const SIWE_MESSAGE_MAX = 4096

export interface SignedIn {
  wallet: Address
  nonce: string
}

const refused = (code: string, message: string) => new ApiError(401, code, message)

// EIP-4361's ABNF as one anchored pattern: every line in its order, optional ones only where the
// grammar has them, nothing after the last. viem's parser searches rather than matches, so alone
// it would skip a field out of order (an Expiration Time after Not Before) or trailing text.
const DATE_TIME =
  '[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})'
const STRICT_SIWE = new RegExp(
  [
    '^(?:[a-zA-Z][a-zA-Z0-9+.-]*://)?(?:[a-zA-Z0-9.-]+|\\[[0-9a-fA-F:.]+\\])(?::[0-9]{1,5})? wants you to sign in with your Ethereum account:\n',
    '0x[a-fA-F0-9]{40}\n',
    '\n',
    "(?:[A-Za-z0-9._~:/?#\\[\\]@!$&'()*+,;= -]+\n)?",
    '\n',
    'URI: [^\\s]+\n',
    'Version: 1\n',
    'Chain ID: [0-9]+\n',
    'Nonce: [a-zA-Z0-9]{8,}\n',
    `Issued At: ${DATE_TIME}`,
    `(?:\nExpiration Time: ${DATE_TIME})?`,
    `(?:\nNot Before: ${DATE_TIME})?`,
    '(?:\nRequest ID: [^\\s]*)?',
    '(?:\nResources:(?:\n- [^\\s]+)*)?$',
  ].join(''),
)

/** The message's fields, or the 400 that says which one is missing or malformed. */
function parse(message: string) {
  if (!STRICT_SIWE.test(message)) {
    throw badRequest(
      'message is not an EIP-4361 message: its lines must be the standard fields in the standard order, and nothing after the last',
      'invalid_siwe_message',
    )
  }
  const fields = parseSiweMessage(message)
  const missing = (['domain', 'address', 'uri', 'version', 'nonce', 'chainId'] as const).find(
    (field) => fields[field] === undefined,
  )
  if (missing)
    throw badRequest(`message is not an EIP-4361 message: no valid ${missing}`, 'invalid_siwe_message')
  if (fields.version !== '1') throw badRequest('message version must be 1', 'invalid_siwe_message')
  if (!/^[A-Za-z0-9]{8,}$/.test(fields.nonce!)) {
    throw badRequest('message nonce must be at least 8 letters and digits', 'invalid_siwe_message')
  }
  for (const time of ['expirationTime', 'notBefore', 'issuedAt'] as const) {
    if (fields[time] && Number.isNaN(fields[time].getTime())) {
      throw badRequest(`message ${time} is not an RFC 3339 time`, 'invalid_siwe_message')
    }
  }
  return fields
}

function sameOrigin(uri: string, origin: string): boolean {
  try {
    return new URL(uri).origin === origin
  } catch {
    return false
  }
}

/** The signer's wallet and the message's nonce, or the 4xx that names what is wrong. */
export async function verifySignIn(
  message: string,
  signature: string,
  publicUrl: string,
  now: Date = new Date(),
): Promise<SignedIn> {
  if (!isHex(signature) || signature.length < 132 || signature.length > 1026) {
    throw badRequest('signature must be a 0x-prefixed hex signature', 'invalid_signature_format')
  }
  const fields = parse(message)
  const own = new URL(publicUrl)
  if (fields.domain !== own.host) {
    throw refused('siwe_domain_mismatch', `message domain must be ${own.host}`)
  }
  if (!sameOrigin(fields.uri!, own.origin))
    throw refused('siwe_uri_mismatch', `message uri must be on ${own.origin}`)
  if (fields.scheme !== undefined && `${fields.scheme}:` !== own.protocol) {
    throw refused('siwe_domain_mismatch', `message scheme must be ${own.protocol.slice(0, -1)}`)
  }
  if (fields.expirationTime && now >= fields.expirationTime)
    throw refused('siwe_expired', 'message has expired')
  if (fields.notBefore && now < fields.notBefore)
    throw refused('siwe_not_yet_valid', 'message is not valid yet')
  let signer: Address
  try {
    signer = await recoverMessageAddress({ message, signature: signature as Hex })
  } catch {
    throw refused('siwe_invalid_signature', 'signature does not recover to the message address')
  }
  if (signer.toLowerCase() !== fields.address!.toLowerCase()) {
    throw refused('siwe_invalid_signature', 'signature does not recover to the message address')
  }
  return { wallet: getAddress(signer), nonce: fields.nonce! }
}
