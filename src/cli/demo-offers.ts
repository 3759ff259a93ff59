// The demo's supply: three offers on the simulated supplier at different asks, so routing picks
// the cheapest and a buyer at the default 50-cent max sees one offer above its price.
import { randomBytes } from 'node:crypto'
import type { GatewayConfig } from '../config.ts'
import { OfferService } from '../market/offers.ts'
import type { MicroDiem } from '../money/units.ts'
import { recordedKeyspace } from '../redis/layout.ts'
import { createStore } from '../redis/store.ts'

export const DEMO_ASKS = [38, 45, 62] as const
const DEMO_CAPACITY = 100_000_000 as MicroDiem // 100 DIEM each

export async function seedDemoOffers(config: GatewayConfig, upstreamUrl: string): Promise<number[]> {
  const store = createStore(config.redisUrl, { name: 'svc-demo' })
  try {
    const offers = new OfferService(
      store,
      await recordedKeyspace(store, config.redisPrefix),
      config.masterKey,
    )
    for (const askCents of DEMO_ASKS) {
      await offers.create({
        upstreamBaseUrl: upstreamUrl,
        upstreamApiKey: `demo-supplier-${askCents}-${randomBytes(8).toString('hex')}`,
        askCents,
        capacity: DEMO_CAPACITY,
        supplier: `demo-${askCents}`,
      })
    }
    return [...DEMO_ASKS]
  } finally {
    store.close()
  }
}
