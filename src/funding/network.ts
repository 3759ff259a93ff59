// The x402 networks the gateway settles on, by their v1 names.
import type { Chain } from 'viem'
import { base, baseSepolia } from 'viem/chains'
import type { X402Network } from '../config.ts'

export const CHAIN_IDS: Record<X402Network, number> = { base: 8453, 'base-sepolia': 84532 }

export const CHAINS: Record<X402Network, Chain> = { base, 'base-sepolia': baseSepolia }

/** The v2 (CAIP-2) name of a network. */
export const caip2 = (network: X402Network) => `eip155:${CHAIN_IDS[network]}`
