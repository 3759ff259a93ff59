// The market's layout is a property of the data, not of one process: the first gateway to start on a
// prefix records it, and every later gateway and CLI command reads it from there. A gateway told a
// different layout than the one recorded refuses to start: it would read none of the market's keys
// and write a second market beside the first.
import { keyspace, type Layout } from './keys.ts'
import type { Store } from './store.ts'

export const LAYOUTS: readonly Layout[] = ['one-slot', 'apart']

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

function parse(value: string | null): Layout | undefined {
  return value === null ? undefined : LAYOUTS.includes(value as Layout) ? (value as Layout) : undefined
}

/**
 * The layout recorded for the prefix. A market written before layouts were recorded has accounts or
 * offers and no record: it is on one slot, the only layout a gateway could then be started with.
 */
export async function recordedLayout(store: Store, prefix: string): Promise<Layout | undefined> {
  const keys = keyspace(prefix)
  const recorded = parse(await store.get(keys.layoutRecord))
  if (recorded) return recorded
  return (await store.exists(keys.accounts, keys.offers)) > 0 ? 'one-slot' : undefined
}

/** Records `wanted` for a new market; throws LayoutMismatchError where another is recorded. */
export async function claimLayout(store: Store, prefix: string, wanted: Layout): Promise<void> {
  const keys = keyspace(prefix)
  const existing = await recordedLayout(store, prefix)
  await store.set(keys.layoutRecord, existing ?? wanted, 'NX')
  const recorded = parse(await store.get(keys.layoutRecord))
  if (recorded !== wanted) throw new LayoutMismatchError(recorded ?? 'one-slot', wanted)
}
