// A payout sender's surroundings on a local chain: anvil with the test USDC (chain.ts), a store on
// the test Redis, and an RPC of the test's own in front of anvil where the test reads through one
// (lagging-rpc.ts, lying-rpc.ts). One stop closes them all. A payout wallet with its funding
// configuration and chain client comes from payoutWalletParts, read directly or through that RPC;
// a sender of it, with the tests' short lock, from payoutSender.

import type { Logger } from 'pino'
import type { FundingConfig } from '../../src/config.ts'
import { type FundingChain, fundingChain } from '../../src/funding/chain.ts'
import { createLogger } from '../../src/logger.ts'
import { PayoutSender, type SenderOptions } from '../../src/payouts/sender.ts'
import { PayoutStore } from '../../src/payouts/store.ts'
import { type PayoutWallet, payoutWallet } from '../../src/payouts/wallet.ts'
import { type Keyspace, keyspace } from '../../src/redis/keys.ts'
import { createStore, type Store } from '../../src/redis/store.ts'
import { startChain, type TestChain } from './chain.ts'
import type { FrontRpc } from './chain-stack.ts'
import { payoutFunding, payoutWalletOn } from './payouts.ts'
import { testPrefix, testRedisUrl } from './stack.ts'

export interface PayoutChainOptions<R extends FrontRpc | undefined> {
  /** The store's client name, as Redis lists it. */
  name: string
  /** Started on anvil's URL: an RPC the test reads the chain through. */
  rpc?: (anvilUrl: string) => R
}

export interface PayoutChain<R = undefined> {
  chain: TestChain
  store: Store
  rpc: R
  /** A fresh keyspace on the store (a prefix of its own) and the payouts kept in it. */
  fresh(): { keys: Keyspace; payouts: PayoutStore }
  /** The RPC, the store and the chain stopped, in that order. */
  stop(): Promise<void>
}

export async function startPayoutChain<R extends FrontRpc | undefined = undefined>(
  options: PayoutChainOptions<R>,
): Promise<PayoutChain<R>> {
  const chain = await startChain()
  let store: Store | undefined
  let rpc: R | undefined
  async function stop(): Promise<void> {
    rpc?.stop()
    store?.close()
    await chain.stop()
  }
  try {
    const redis = createStore(testRedisUrl(), { name: options.name })
    store = redis
    rpc = options.rpc?.(chain.rpcUrl) as R
    const fresh = () => {
      const keys = keyspace(testPrefix())
      return { keys, payouts: new PayoutStore(redis, keys) }
    }
    return { chain, store: redis, rpc: rpc as R, fresh, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

export interface PayoutWalletParts {
  key: `0x${string}`
  address: `0x${string}`
  funding: FundingConfig
  onChain: FundingChain
  wallet: PayoutWallet
}

/**
 * A fresh payout wallet holding `usdc` micro-USDC (payoutWalletOn), the funding configuration a
 * sender of it reads (asking `confirmations`, through `rpcUrl` when given) and its chain client.
 */
export async function payoutWalletParts(
  chain: TestChain,
  confirmations: number,
  options: { usdc?: bigint; rpcUrl?: string } = {},
): Promise<PayoutWalletParts> {
  const { key, address } = await payoutWalletOn(chain, options.usdc)
  const config = payoutFunding(chain, key, confirmations)
  const funding = options.rpcUrl ? { ...config, chainRpcUrl: options.rpcUrl } : config
  const onChain = fundingChain(funding, 20)
  return { key, address, funding, onChain, wallet: payoutWallet(key, funding, onChain) }
}

/**
 * A sender as the tests run one: a short lock (300 ms), so that one left hanging lapses soon
 * (passUntil in payouts.ts), and no fee bump before a minute unless the test asks one sooner.
 */
export function payoutSender(
  payouts: PayoutStore,
  wallet: PayoutWallet,
  onChain: FundingChain,
  options: Pick<SenderOptions, 'confirmations' | 'receiptTimeoutMs' | 'beforeBroadcast'> & {
    bumpAfterMs?: number
  },
  logger: Logger = createLogger('silent'),
): PayoutSender {
  return new PayoutSender(payouts, wallet, onChain, logger, {
    confirmations: options.confirmations,
    lockTtlMs: 300,
    receiptTimeoutMs: options.receiptTimeoutMs,
    bumpAfterMs: options.bumpAfterMs ?? 60_000,
    beforeBroadcast: options.beforeBroadcast,
  })
}
