// Wallets are EVM addresses: stored checksummed (EIP-55), compared in lower case. From viem/utils,
// not viem's index: the gateway loads this with every app, and the index loads twice the modules.
import { getAddress, isAddress } from 'viem/utils'

/**
 * The checksummed form of an address, or null. All-lower or all-upper hex is accepted as is;
 * mixed case must carry a valid checksum, since a wrong one usually means a mistyped address.
 */
export function checksumWallet(input: string): `0x${string}` | null {
  const trimmed = input.trim()
  if (!isAddress(trimmed, { strict: false })) return null
  const body = trimmed.slice(2)
  const mixedCase = body !== body.toLowerCase() && body !== body.toUpperCase()
  if (mixedCase && !isAddress(trimmed, { strict: true })) return null
  return getAddress(trimmed)
}

export const walletKey = (wallet: string) => wallet.toLowerCase()
