// Payouts for one replica: the service the routes use and, with a payout wallet configured, the
// sender (every replica runs it; the sender lock lets one work at a time) and the balance watch.
import type { Logger } from 'pino'
import type { GatewayConfig } from '../config.ts'
import type { FundingChain } from '../funding/chain.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { watchBalances } from './balances.ts'
import type { PayoutSender, SenderOptions } from './sender.ts'
import { PayoutService } from './service.ts'
import { PayoutStore } from './store.ts'

export interface Payouts {
  service: PayoutService
  sender: PayoutSender | undefined
  stop(): void
}

export async function startPayouts(
  config: GatewayConfig,
  store: Store,
  keys: Keyspace,
  logger: Logger,
  chain?: FundingChain,
  seams: Pick<SenderOptions, 'beforeBroadcast'> = {},
): Promise<Payouts> {
  const { payouts, funding } = config
  if (!payouts.privateKey || !funding) {
    return { service: new PayoutService(store, keys, payouts), sender: undefined, stop() {} }
  }
  // The wallet and the chain client (viem) are loaded only by a gateway that sends payouts.
  const [{ fundingChain }, { PayoutSender }, { payoutWallet }] = await Promise.all([
    import('../funding/chain.ts'),
    import('./sender.ts'),
    import('./wallet.ts'),
  ])
  const onChain = chain ?? fundingChain(funding)
  const wallet = payoutWallet(payouts.privateKey, funding, onChain)
  const sender = new PayoutSender(new PayoutStore(store, keys), wallet, onChain, logger, {
    confirmations: funding.confirmations,
    lockTtlMs: payouts.lockTtlMs,
    receiptTimeoutMs: funding.receiptTimeoutMs,
    bumpAfterMs: payouts.bumpAfterMs,
    ...seams,
  })
  const tick = () => {
    sender.tick().catch((error: Error) => logger.warn({ err: error.message }, 'payout sender tick failed'))
  }
  const timer = setInterval(tick, payouts.intervalMs)
  const stopBalances = watchBalances(wallet, payouts, logger)
  return {
    service: new PayoutService(store, keys, payouts, tick, wallet.address),
    sender,
    stop() {
      clearInterval(timer)
      stopBalances()
      sender.stop()
    },
  }
}
