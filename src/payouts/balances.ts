// The payout wallet's USDC and gas balances, read on a timer (never per scrape) for /metrics, with
// a warning in the log while either is below its threshold (SVC_PAYOUT_LOW_USDC, _LOW_GAS_ETH).
import type { Logger } from 'pino'
import type { PayoutConfig } from '../config.ts'
import { metrics } from '../metrics/gateway-metrics.ts'
import { formatMicros } from '../money/units.ts'
import type { PayoutWallet } from './wallet.ts'

/** How often the balances are read: they move with payouts, a few a minute at most. */
export const BALANCE_READ_MS = 30_000

export async function readBalances(
  wallet: PayoutWallet,
  config: PayoutConfig,
  logger: Logger,
): Promise<void> {
  const [usdc, gas] = await Promise.all([wallet.usdcBalance(), wallet.gasBalance()])
  metrics.payoutWallet.usdcMicros = Number(usdc)
  metrics.payoutWallet.gasWei = gas
  if (usdc < BigInt(config.lowUsdcMicros)) {
    logger.warn(
      { wallet: wallet.address, usdc: formatMicros(Number(usdc)), below: formatMicros(config.lowUsdcMicros) },
      'payout wallet low on USDC',
    )
  }
  if (gas < config.lowGasWei) {
    logger.warn(
      { wallet: wallet.address, gasWei: gas.toString(), belowWei: config.lowGasWei.toString() },
      'payout wallet low on gas',
    )
  }
}

/** Reads now and every `everyMs`; returns the stop function. */
export function watchBalances(
  wallet: PayoutWallet,
  config: PayoutConfig,
  logger: Logger,
  everyMs = BALANCE_READ_MS,
): () => void {
  const read = () =>
    readBalances(wallet, config, logger).catch((error: Error) => {
      logger.warn({ err: error.message }, 'payout wallet balances could not be read')
    })
  read()
  const timer = setInterval(read, everyMs)
  return () => clearInterval(timer)
}
