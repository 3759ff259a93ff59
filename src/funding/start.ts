// Funding for one replica: its parts, and the confirmations watcher and reconciler running.
import type { Logger } from 'pino'
import { AccountStore } from '../accounts/accounts.ts'
import type { GatewayConfig } from '../config.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { accountForPayer } from './accounts.ts'
import { createFunding, type Funding, startFundingWatch, watchDeps } from './index.ts'

export function startFunding(
  config: GatewayConfig,
  store: Store,
  keys: Keyspace,
  logger: Logger,
): { funding: Funding; stop(): void } | undefined {
  if (!config.funding) return undefined
  const funding = createFunding(
    config.funding,
    store,
    keys,
    logger,
    config.records.recordRetentionDays * 86_400_000,
  )
  const accounts = new AccountStore(store, keys)
  // A signup settled without its account (receipt timeout) is credited to the payer's account,
  // created here if need be; its first key is never shown, and the payer mints one by signing up again.
  const resolveAccount = async (payer: `0x${string}`) =>
    (await accountForPayer(accounts, payer, config.defaultMaxPriceCents)).accountId
  const stop = startFundingWatch(watchDeps(funding, logger, resolveAccount))
  return { funding, stop }
}
