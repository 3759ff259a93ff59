// The x402 networks the gateway settles on, by their v1 names.
import type { X402Network } from '../config.ts'

export const CHAIN_IDS: Record<X402Network, number> = { base: 8453, 'base-sepolia': 84532 }

/** The v2 (CAIP-2) name of a network. */
export const caip2 = (network: X402Network) => `eip155:${CHAIN_IDS[network]}`
