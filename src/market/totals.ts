// The market's running totals, kept by the clear itself (lua/clear.lua) on the market hash: what
// buyers were charged, the platform's fees, what late clears wrote off and the burn suppliers
// reported beyond what could be billed. One read, however large the market.
import { formatMicros } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

export async function marketTotals(store: Store, keys: Keyspace) {
  const [spent, fees, writtenOff, disputed] = (
    await store.hmget(keys.market, 'spent', 'fees', 'writtenOff', 'disputed')
  ).map((value) => Number(value ?? 0)) as [number, number, number, number]
  return {
    object: 'market_totals' as const,
    spentUsdc: formatMicros(spent),
    // Every clear pays the supplier what the buyer was charged less the fee.
    earnedUsdc: formatMicros(spent - fees),
    feesUsdc: formatMicros(fees),
    writtenOffUsdc: formatMicros(writtenOff),
    disputedBurnDiem: formatMicros(disputed),
  }
}
