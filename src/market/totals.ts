// The market's running totals, kept by the clear itself (lua/clear.lua) on the market hash: what
// buyers were charged, the platform's fees, what late clears wrote off and the burn suppliers
// reported beyond what could be billed. One read, however large the market; held apart, the clear
// keeps them on each account shard's market hash, and the totals are one read per shard (4,096,
// whatever the number of accounts), and one of the market's own, where a market migrated from one
// slot keeps what it counted before (src/cli/migrate-apart.ts).
import { formatMicros } from '../money/units.ts'
import { accountShardKeyspaces, type Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

const FIELDS = ['spent', 'fees', 'writtenOff', 'disputed'] as const

export async function marketTotals(store: Store, keys: Keyspace) {
  const hashes =
    keys.layout === 'apart'
      ? [keys.market, ...accountShardKeyspaces(keys.prefix).map((shard) => shard.market)]
      : [keys.market]
  const rows = await Promise.all(hashes.map((hash) => store.hmget(hash, ...FIELDS)))
  const [spent, fees, writtenOff, disputed] = FIELDS.map((_, i) =>
    rows.reduce((sum, row) => sum + Number(row[i] ?? 0), 0),
  ) as [number, number, number, number]
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
