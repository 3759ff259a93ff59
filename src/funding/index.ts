// Builds the funding parts from config: the chain reader, the settler (self-facilitated by the
// relayer key, or a remote facilitator), the ledger, the payments service and the signup fuse.
import type { Logger } from 'pino'
import { type Address, decodeFunctionData, type Hex } from 'viem'
import type { FundingConfig } from '../config.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { SearchMarks } from './authorization-use.ts'
import { eip3009Abi, type FundingChain, fundingChain } from './chain.ts'
import { SignupFuse } from './fuse.ts'
import { authorizationId, PaymentLedger } from './ledger.ts'
import { CHAIN_IDS } from './network.ts'
import { CLOCK_SKEW_SECONDS, Payments } from './payments.ts'
import { Relayer } from './relayer.ts'
import { SenderTurns } from './sender-lock.ts'
import { RemoteSettler, SelfSettler, type Settler } from './settler.ts'
import type { ClaimOf } from './unmined.ts'
import { startFundingWatch, type WatchDeps } from './watcher.ts'

export interface Funding {
  config: FundingConfig
  chain: FundingChain
  ledger: PaymentLedger
  payments: Payments
  fuse: SignupFuse
  /** Signs again with higher fees, or cancels, the relayer's sends left unmined (self-facilitated only). */
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
      // Sent after its claim, an authorization has expired this long after its last signing.
      cancelAfterMs: (config.maxTimeoutSeconds + CLOCK_SKEW_SECONDS) * 1000,
      logger,
    })
    relayers.set(id, relayer)
  }
  return relayer
}

/**
 * The claim a relayer call settles: the authorization its transferWithAuthorization of the USDC
 * uses. Any replica records a replacement's hash on it so, whichever replica sent the call.
 */
function claimOfCall(config: FundingConfig, ledger: PaymentLedger): ClaimOf {
  return (call) => {
    if (call.to.toLowerCase() !== config.usdcAddress.toLowerCase()) return undefined
    let decoded: ReturnType<typeof decodeFunctionData<typeof eip3009Abi>>
    try {
      decoded = decodeFunctionData({ abi: eip3009Abi, data: call.data })
    } catch {
      return undefined
    }
    if (decoded.functionName !== 'transferWithAuthorization') return undefined
    const [payer, , , , , nonce] = decoded.args
    const id = authorizationId(CHAIN_IDS[config.network], config.usdcAddress, payer, nonce)
    return (hash) => ledger.markSent(id, hash)
  }
}

/** `recordRetentionMs`: SVC_RECORD_RETENTION_DAYS, how long a moved or reversed payment's old id answers. */
export function createFunding(
  config: FundingConfig,
  store: Store,
  keys: Keyspace,
  logger: Logger,
  recordRetentionMs?: number,
): Funding {
  const chain = fundingChain(config, Math.min(250, Math.max(20, Math.floor(config.receiptTimeoutMs / 10))))
  const ledger = new PaymentLedger(store, keys, recordRetentionMs)
  let settler: Settler = new RemoteSettler(config, chain)
  let replaceUnmined: Funding['replaceUnmined']
  if (config.relayerPrivateKey) {
    const relayer = relayerFor(config, chain, config.relayerPrivateKey, logger)
    const turns = new SenderTurns(store, keys, relayer.account.address)
    settler = new SelfSettler(config, chain, relayer, turns)
    const claimOf = claimOfCall(config, ledger)
    replaceUnmined = () => relayer.replaceUnmined(turns, claimOf)
  }
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
    searched: new SearchMarks(),
  }
}

export { startFundingWatch }
