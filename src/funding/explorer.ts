// Where a person can look a transaction up: the block explorer of the configured network. A chain
// reached on this machine (a local node) has no public explorer, so its hashes are shown plain.
import type { FundingConfig } from '../config.ts'

const EXPLORERS = {
  base: 'https://basescan.org/tx/',
  'base-sepolia': 'https://sepolia.basescan.org/tx/',
} as const

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '0.0.0.0'])

/** The explorer's transaction URL prefix, or null when there is none to link to. */
export function explorerTxBase(
  funding: Pick<FundingConfig, 'network' | 'chainRpcUrl'> | undefined,
): string | null {
  if (!funding) return null
  try {
    if (LOOPBACK.has(new URL(funding.chainRpcUrl).hostname)) return null
  } catch {
    return null
  }
  return EXPLORERS[funding.network] ?? null
}
