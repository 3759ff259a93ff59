// Builds the funding parts from config: the chain reader, the settler (self-facilitated by the
// relayer key, or a remote facilitator), the ledger, the payments service and the signup fuse.
import type { Logger } from 'pino'
import type { Address, Hex } from 'viem'
import type { FundingConfig } from '../config.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { type FundingChain, fundingChain } from './chain.ts'
import { SignupFuse } from './fuse.ts'
import { PaymentLedger } from './ledger.ts'
import { Payments } from './payments.ts'
import { Relayer } from './relayer.ts'
import { SenderTurns } from './sender-lock.ts'
import { RemoteSettler, SelfSettler, type Settler } from './settler.ts'
import { startFundingWatch, type WatchDeps } from './watcher.ts'

export interface Funding {
  config: FundingConfig
  chain: FundingChain
  ledger: PaymentLedger
  payments: Payments
  fuse: SignupFuse
  /** Signs again with higher fees the relayer's sends left unmined (self-facilitated only). */
  replaceUnmined?: () => Promise<number>
}

// One relayer per key and RPC in the process, however many apps are built: its queue and nonce
// counter are only correct if nothing else sends from that key here.
const relayers = new Map<string, Relayer>()

function relayerFor(config: FundingConfig, chain: FundingChain, key: Hex, logger: Logger): Relayer {
  const id = `${config.chainRpcUrl}|${key}`
  let relayer = relayers.get(id)
  if (!relayer) {
    relayer = new Relayer(key, chain.client, chain.chain, config.chainRpcUrl, {
      afterMs: config.relayerBumpAfterMs,
      maxFeePerGas: config.relayerMaxFeeWei,
      logger,
    })
    relayers.set(id, relayer)
  }
  return relayer
}

export function createFunding(config: FundingConfig, store: Store, keys: Keyspace, logger: Logger): Funding {
  const chain = fundingChain(config, Math.min(250, Math.max(20, Math.floor(config.receiptTimeoutMs / 10))))
  let settler: Settler = new RemoteSettler(config, chain)
  let replaceUnmined: Funding['replaceUnmined']
  if (config.relayerPrivateKey) {
    const relayer = relayerFor(config, chain, config.relayerPrivateKey, logger)
    const turns = new SenderTurns(store, keys, relayer.account.address)
    settler = new SelfSettler(config, chain, relayer, turns)
    replaceUnmined = () => relayer.replaceUnmined(turns)
  }
  const ledger = new PaymentLedger(store, keys)
  return {
    config,
    chain,
    ledger,
    payments: new Payments(config, settler, ledger, chain, logger),
    fuse: new SignupFuse(store, keys, config.signupFusePerMinute, config.fuseClock),
    replaceUnmined,
  }
}

export function watchDeps(
  funding: Funding,
  logger: Logger,
  resolveAccount: (payer: Address) => Promise<string>,
): WatchDeps {
  return {
    config: funding.config,
    ledger: funding.ledger,
    chain: funding.chain,
    logger,
    resolveAccount,
    replaceUnmined: funding.replaceUnmined,
  }
}

export { startFundingWatch }
