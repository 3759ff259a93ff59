// The market's minimum remaining capacity (SVC_MIN_ROUTABLE_MICRO_DIEM) lives on the market hash,
// where the scripts read it (lua/lib/ladder.lua). Each replica writes its own there at start, before
// its first request, so the last one started sets it for all: a different value found is a mixed
// setting across replicas, which an operator is told of rather than left to find by routing.
import type { Logger } from 'pino'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'

export async function publishMinRoutable(
  store: Store,
  keys: Keyspace,
  own: number,
  logger: Logger,
): Promise<void> {
  const found = await store.hget(keys.market, 'minRoutable')
  await store.hset(keys.market, 'minRoutable', own)
  if (found === null || Number(found) === own) return
  // Lowered: offers dry only by the old minimum go back by the reaper's sweep (lua/lib/ladder.lua
  // sweep_dry), which runs only while this cursor stands.
  if (Number(found) > own) await store.hset(keys.market, 'drySwept', '-inf')
  logger.warn(
    { found: Number(found), own },
    "SVC_MIN_ROUTABLE_MICRO_DIEM differs from the market's: this replica's setting wins until another replica starts; each still refuses postings below its own",
  )
}
