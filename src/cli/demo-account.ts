// The demo's buyer: an account with a known wallet (a fresh random one if that wallet is taken,
// as it is when the demo reuses a REDIS_URL), credited through the same services the operator uses.
import { randomBytes } from 'node:crypto'
import { getAddress } from 'viem'
import { AccountStore } from '../accounts/accounts.ts'
import type { GatewayConfig } from '../config.ts'
import { ApiError } from '../errors.ts'
import { recordedKeyspace } from '../redis/layout.ts'
import { createStore } from '../redis/store.ts'

export const DEMO_WALLET = '0x000000000000000000000000000000000000dEaD'
export const DEMO_CREDIT_USDC = '25.000000'

export async function createDemoAccount(config: GatewayConfig) {
  const store = createStore(config.redisUrl, { name: 'svc-demo' })
  try {
    const accounts = new AccountStore(store, await recordedKeyspace(store, config.redisPrefix))
    const created = await accounts
      .create(DEMO_WALLET, config.defaultMaxPriceCents)
      .catch((error: unknown) => {
        if (!(error instanceof ApiError && error.code === 'wallet_taken')) throw error
        return accounts.create(
          getAddress(`0x${randomBytes(20).toString('hex')}`),
          config.defaultMaxPriceCents,
        )
      })
    await accounts.credit(created.account.id, DEMO_CREDIT_USDC, 'demo', 'demo')
    return { accountId: created.account.id, wallet: created.account.wallet, apiKey: created.apiKey }
  } finally {
    store.close()
  }
}
