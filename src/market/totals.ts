// The market's running totals: what buyers were charged, the platform's fees, what late clears
// wrote off and the burn suppliers reported beyond what could be billed. On one slot the clear
// (lua/clear.lua) writes each charge's earnings and fee on its offer in the offer's own write, so
// spend and fees are the sums over the offers (one read per offer, however many accounts; an
// offer is only ever marked deleted, so its history stays); write-offs and disputed burn are on
// the market hash. Held apart, the clear keeps all four on each account shard's market hash, and
// the totals are one read per shard (4,096, whatever the number of accounts), and one of the
// market's own, where a market migrated from one slot keeps what it counted before
// (src/cli/migrate-apart.ts: its spend and fees as `migratedSpent` and `migratedFees`).
import { formatMicros } from '../money/units.ts'
import { accountShardKeyspaces, type Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

const FIELDS = ['spent', 'fees', 'writtenOff', 'disputed'] as const

/** [spent, fees, writtenOff, disputed] summed over rows of those four values. */
const sums = (rows: (string | null)[][]) =>
  FIELDS.map((_, i) => rows.reduce((sum, row) => sum + Number(row[i] ?? 0), 0)) as [
    number,
    number,
    number,
    number,
  ]

export async function oneSlotSums(store: Store, keys: Keyspace) {
  const pipeline = store.pipeline()
  pipeline.hmget(keys.market, 'writtenOff', 'disputed')
  for (const id of await store.smembers(keys.offers)) pipeline.hmget(keys.offer(id), 'earned', 'fees')
  const [market, ...offers] = ((await pipeline.exec()) ?? []).map(([error, row]) => {
    if (error) throw error
    return row as (string | null)[]
  })
  // An offer's earned and fees are what its clears charged: the charge less the fee, and the fee.
  let [spent, fees] = [0, 0]
  for (const [earned, fee] of offers) {
    spent += Number(earned ?? 0) + Number(fee ?? 0)
    fees += Number(fee ?? 0)
  }
  const [writtenOff, disputed] = (market ?? []).map((value) => Number(value ?? 0))
  return [spent, fees, writtenOff ?? 0, disputed ?? 0] as const
}

/** What a market migrated from one slot counted before, as the shards' hashes count it. */
export const MIGRATED_FIELDS = ['migratedSpent', 'migratedFees', 'writtenOff', 'disputed'] as const

async function apartSums(store: Store, keys: Keyspace) {
  const shards = accountShardKeyspaces(keys.prefix).map((shard) => store.hmget(shard.market, ...FIELDS))
  return sums(await Promise.all([store.hmget(keys.market, ...MIGRATED_FIELDS), ...shards]))
}

export async function marketTotals(store: Store, keys: Keyspace) {
  const [spent, fees, writtenOff, disputed] =
    keys.layout === 'apart' ? await apartSums(store, keys) : await oneSlotSums(store, keys)
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
