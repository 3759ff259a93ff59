// `svc-gateway layout [show]`: the layout recorded for the market (REDIS_URL, SVC_REDIS_PREFIX).
// `svc-gateway layout migrate apart`: moves a one-slot market to apart with every gateway stopped
// (migrate-apart.ts); exit 1 naming why when it may not start, and nothing changed. Run again, a
// migration stopped part-way finishes. Moving back to one slot is not supported.
import { loadStoreConfig, reapIntervalMs } from '../config.ts'
import { seenWithinMs } from '../market/replicas.ts'
import { migrationUnderWay, recordedLayout } from '../redis/layout.ts'
import { createStore } from '../redis/store.ts'
import { MigrationRefused, migrateApart } from './migrate-apart.ts'

export const LAYOUT_USAGE = `usage:
  svc-gateway layout [show]          the market's layout, as recorded in Redis
  svc-gateway layout migrate apart   moves a one-slot market to apart (every gateway stopped)`

export async function layout(args: string[]): Promise<void> {
  const [command = 'show', to, ...rest] = args
  const valid = (command === 'show' && !to) || (command === 'migrate' && to && rest.length === 0)
  if (!valid) {
    console.error(LAYOUT_USAGE)
    process.exitCode = 2
    return
  }
  if (command === 'migrate' && to !== 'apart') {
    console.error(
      to === 'one-slot'
        ? 'layout migrate one-slot: moving a market back to one slot is not supported'
        : `layout migrate: no layout '${to}' (one-slot, apart)\n${LAYOUT_USAGE}`,
    )
    process.exitCode = to === 'one-slot' ? 1 : 2
    return
  }
  const config = loadStoreConfig()
  const withinMs = seenWithinMs(reapIntervalMs())
  const store = createStore(config.redisUrl, { name: 'svc-cli' })
  try {
    if (command === 'show') {
      const migrating = await migrationUnderWay(store, config.redisPrefix)
      if (migrating) console.log(`one-slot, part-way through a migration to ${migrating}`)
      else console.log((await recordedLayout(store, config.redisPrefix)) ?? 'none recorded (no market yet)')
      return
    }
    const say = (line: string) => console.log(`layout migrate: ${line}`)
    const moved = await migrateApart(store, config.redisPrefix, { seenWithinMs: withinMs, say })
    say(moved ? 'the market is held apart; start the gateways with SVC_REDIS_LAYOUT=apart' : 'already apart')
  } catch (error) {
    if (!(error instanceof MigrationRefused)) throw error
    console.error(`layout migrate: ${error.message}`)
    process.exitCode = 1
  } finally {
    store.close()
  }
}
