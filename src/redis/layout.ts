// The market's layout is a property of the data, not of one process: the first gateway to start on a
// prefix records it, and every later gateway and CLI command reads it from there. A gateway told a
// different layout than the one recorded refuses to start: it would read none of the market's keys
// and write a second market beside the first. While `svc-gateway layout migrate` moves a market the
// record says so, and nothing but that command opens it: the market is in neither layout whole.
import { type Keyspace, keyspace, type Layout } from './keys.ts'
import type { Store } from './store.ts'

export const LAYOUTS: readonly Layout[] = ['one-slot', 'apart']

/** The record's value while a migration to `layout` is under way (src/cli/layout.ts). */
export const migratingTo = (layout: Layout) => `migrating to ${layout}`

export class LayoutMismatchError extends Error {
  constructor(
    readonly recorded: Layout,
    readonly wanted: Layout,
  ) {
    super(
      `this Redis holds the market in the '${recorded}' layout; SVC_REDIS_LAYOUT=${wanted} would read none of it ` +
        `(\`svc-gateway layout migrate ${wanted}\` moves it, with every gateway stopped)`,
    )
  }
}

/** The market is being moved: no gateway or command may use it until the migration finishes. */
export class LayoutMigratingError extends Error {
  constructor(readonly to: Layout) {
    super(
      `this Redis holds a market part-way through a migration to the '${to}' layout; ` +
        `\`svc-gateway layout migrate ${to}\` finishes it (every gateway stopped)`,
    )
  }
}

function parse(value: string | null): Layout | undefined {
  return value === null ? undefined : LAYOUTS.includes(value as Layout) ? (value as Layout) : undefined
}

/** The migration the record says is under way, if any. */
export async function migrationUnderWay(store: Store, prefix: string): Promise<Layout | undefined> {
  const value = await store.get(keyspace(prefix).layoutRecord)
  return LAYOUTS.find((layout) => value === migratingTo(layout))
}

/**
 * The layout recorded for the prefix. A market written before layouts were recorded has accounts or
 * offers and no record: it is on one slot, the only layout a gateway could then be started with.
 * Throws LayoutMigratingError while a migration is under way.
 */
export async function recordedLayout(store: Store, prefix: string): Promise<Layout | undefined> {
  const keys = keyspace(prefix)
  const value = await store.get(keys.layoutRecord)
  const recorded = parse(value)
  if (recorded) return recorded
  const to = LAYOUTS.find((layout) => value === migratingTo(layout))
  if (to) throw new LayoutMigratingError(to)
  return (await store.exists(keys.accounts, keys.offers)) > 0 ? 'one-slot' : undefined
}

/** Records `wanted` for a new market; throws LayoutMismatchError where another is recorded. */
export async function claimLayout(store: Store, prefix: string, wanted: Layout): Promise<void> {
  const keys = keyspace(prefix)
  const existing = await recordedLayout(store, prefix)
  await store.set(keys.layoutRecord, existing ?? wanted, 'NX')
  const value = await store.get(keys.layoutRecord)
  const to = LAYOUTS.find((layout) => value === migratingTo(layout))
  if (to) throw new LayoutMigratingError(to)
  const recorded = parse(value)
  if (recorded !== wanted) throw new LayoutMismatchError(recorded ?? 'one-slot', wanted)
}

/**
 * The keyspace of the market on `prefix` in the layout recorded there (none recorded: one slot, as
 * a new market's first gateway would default to): how every operator command opens the market.
 */
export async function recordedKeyspace(store: Store, prefix: string): Promise<Keyspace> {
  return keyspace(prefix, (await recordedLayout(store, prefix)) ?? 'one-slot')
}
