// `svc-gateway export --group NAME [--once] [--consumer NAME]`: the market's ended-attempt Stream
// (`settled`) as JSON lines on stdout, for a warehouse, through a Redis consumer group (REDIS_URL,
// SVC_REDIS_PREFIX). Each line is acknowledged once it is written, so a restarted export resumes
// where the last one stopped: first the entries it was given and never acknowledged (its pending
// list), then new ones. At-least-once: an export killed between a write and its XACK writes that
// line again; a line's `id` (the Stream entry id, unique and increasing) tells repeats apart.
// `--once` exits when caught up; otherwise it waits for new entries until SIGINT or SIGTERM. Held
// apart, each account shard's scripts append to a Stream on the shard's slot: every one is read,
// and a line's id is `a.<shard>:<entry id>` (unique, increasing within its shard).
import { parseArgs } from 'node:util'
import { loadStoreConfig } from '../config.ts'
import { formatMicros } from '../money/units.ts'
import { fieldsOf } from '../records/activity.ts'
import { parseAttemptId } from '../records/attempt-id.ts'
import { ACCOUNT_SHARDS, accountShardKeyspaces, type Keyspace } from '../redis/keys.ts'
import { recordedKeyspace } from '../redis/layout.ts'
import type { Store } from '../redis/store.ts'
import { createStore } from '../redis/store.ts'

export const EXPORT_USAGE = `usage: svc-gateway export --group NAME [--once] [--consumer NAME]
  the market's settled attempts as JSON lines on stdout, through the consumer group NAME
  (created at the oldest entry kept); acknowledged after each line is written, resumed from
  there by the next run with the same group and consumer (default consumer: export)`

const BATCH = 500
/** How long a read waits for new entries before it looks at the stop flag again. */
const BLOCK_MS = 1_000

interface ExportOptions {
  group: string
  consumer: string
  once: boolean
}

type Entry = [id: string, fields: string[]]
type ReadReply = [stream: string, entries: Entry[]][] | null

/** One settled attempt as its export line (money as 6-decimal strings, as the API gives it). */
export function exportLine([id, flat]: Entry, lineId = id): string {
  const f = fieldsOf(flat)
  const attempt = f.attempt ?? ''
  const int = (value: string | undefined) => (value ? Number(value) : null)
  return `${JSON.stringify({
    id: lineId,
    endedAt: new Date(Number(id.slice(0, id.indexOf('-')))).toISOString(),
    attemptId: attempt,
    supportReference: parseAttemptId(attempt)?.supportReference ?? attempt,
    accountId: f.account || null,
    keyId: f.key || null,
    model: f.model || null,
    status: f.status ?? null,
    costUsdc: formatMicros(Number(f.costUsdc ?? 0)),
    clearingPriceCents: int(f.askCents),
    inputTokens: int(f.inputTokens),
    outputTokens: int(f.outputTokens),
    offerId: f.offer || null,
    errorCode: f.errorCode || null,
  })}\n`
}

function parse(args: string[]): ExportOptions | null {
  try {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        group: { type: 'string' },
        consumer: { type: 'string', default: 'export' },
        once: { type: 'boolean', default: false },
      },
    })
    const name = /^[A-Za-z0-9_.:-]{1,64}$/
    if (positionals.length > 0 || !values.group || !name.test(values.group) || !name.test(values.consumer)) {
      return null
    }
    return { group: values.group, consumer: values.consumer, once: values.once }
  } catch {
    return null
  }
}

/** Resolves once the line is handed to the operating system (the pipe, the file). */
function writeLine(line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    process.stdout.write(line, (error) => (error ? reject(error) : resolve()))
  })
}

async function ensureGroup(store: Store, stream: string, group: string): Promise<void> {
  try {
    // From the oldest entry still kept: a new warehouse gets everything there is.
    await store.xgroup('CREATE', stream, group, '0', 'MKSTREAM')
  } catch (error) {
    if (!/BUSYGROUP/.test((error as Error).message)) throw error
  }
}

/** Writes and acknowledges one batch; false when asked to stop part-way. */
async function emit(store: Store, source: Source, group: string, entries: Entry[], stopped: () => boolean) {
  for (const entry of entries) {
    if (stopped()) return false
    await writeLine(exportLine(entry, source.lineId(entry[0])))
    await store.xack(source.stream, group, entry[0])
  }
  return true
}

/**
 * How many entries the Stream trimmed before this group read them (it keeps about SETTLED_MAXLEN):
 * entries ever added less those still kept less those the group has read. Null when Redis cannot
 * say (a group created at an arbitrary id has no read count).
 */
export async function trimmedUnread(store: Store, stream: string, group: string): Promise<number | null> {
  const info = (await store.xinfo('STREAM', stream)) as unknown[]
  const groups = (await store.xinfo('GROUPS', stream)) as unknown[][]
  const row = groups.find((g) => g[g.indexOf('name') + 1] === group)
  const read = row?.[row.indexOf('entries-read') + 1]
  if (typeof read !== 'number') return null
  const field = (name: string) => Number(info[info.indexOf(name) + 1])
  return Math.max(0, field('entries-added') - field('length') - read)
}

/** One Stream exported: its key, and how its lines' ids name its entries. */
interface Source {
  stream: string
  /** The line's id for an entry id: the id itself, or held apart, prefixed by the Stream's shard. */
  lineId: (entryId: string) => string
}

/**
 * The Streams the ended attempts are on: the market's, and held apart every account shard's that
 * holds any (each shard's scripts append on their own slot; a market migrated from one slot keeps
 * its earlier entries on the market's).
 */
async function sources(store: Store, keys: Keyspace): Promise<Source[]> {
  const market = { stream: keys.endedAttempts, lineId: (id: string) => id }
  if (keys.layout !== 'apart') return [market]
  const shards = accountShardKeyspaces(keys.prefix)
  const present = await Promise.all(shards.map((shard) => store.exists(shard.endedAttempts)))
  const own = shards.flatMap((shard, i) =>
    present[i]
      ? [{ stream: shard.endedAttempts, lineId: (id: string) => `a.${ACCOUNT_SHARDS[i]}:${id}` }]
      : [],
  )
  return [market, ...own]
}

/**
 * One read of the group's consumer: what it was given after `from` and never acknowledged, or new
 * entries (`>`), waiting up to BLOCK_MS for one when `block`.
 */
async function readGroup(
  store: Store,
  stream: string,
  { group, consumer }: ExportOptions,
  from: string,
  block = false,
): Promise<Entry[]> {
  const wait = (block ? ['BLOCK', BLOCK_MS] : []) as ['BLOCK', number]
  const reply = (await store.xreadgroup(
    'GROUP',
    group,
    consumer,
    'COUNT',
    BATCH,
    ...wait,
    'STREAMS',
    stream,
    from,
  )) as ReadReply
  return reply?.[0]?.[1] ?? []
}

/** Writes what the consumer was given and never acknowledged; false when asked to stop part-way. */
async function resend(store: Store, source: Source, options: ExportOptions, stopped: () => boolean) {
  const { stream } = source
  const { group } = options
  await ensureGroup(store, stream, group)
  const lost = await trimmedUnread(store, stream, group)
  if (lost)
    console.error(
      `export: ${lost} settled attempts were trimmed from the Stream before group ${group} read them`,
    )
  let after = '0'
  for (;;) {
    const given = await readGroup(store, stream, options, after)
    if (given.length === 0) return true
    // A pending entry trimmed from the Stream meanwhile comes back without fields: it is gone.
    const trimmed = given.filter(([, fields]) => fields === null).map(([id]) => id)
    if (trimmed.length > 0) {
      console.error(
        `export: ${trimmed.length} pending entries were trimmed before export: ${trimmed.join(' ')}`,
      )
      await store.xack(stream, group, ...trimmed)
    }
    const entries = given.filter(([, fields]) => fields !== null)
    if (!(await emit(store, source, group, entries, stopped))) return false
    after = given.at(-1)![0]
  }
}

/** New entries until none is left (blocking up to BLOCK_MS for the first when `block`); false when stopped. */
async function sendNew(
  store: Store,
  source: Source,
  options: ExportOptions,
  stopped: () => boolean,
  block: boolean,
) {
  while (!stopped()) {
    const entries = await readGroup(store, source.stream, options, '>', block)
    if (entries.length === 0) return true
    if (!(await emit(store, source, options.group, entries, stopped))) return false
  }
  return false
}

export async function runExport(
  store: Store,
  keys: Keyspace,
  options: ExportOptions,
  stopped: () => boolean,
) {
  // First what this consumer was given and never acknowledged (the lines a crash may have cut),
  // then new entries, until caught up (--once) or stopped.
  const started = new Set<string>()
  for (;;) {
    const all = await sources(store, keys)
    for (const source of all) {
      if (!started.has(source.stream) && !(await resend(store, source, options, stopped))) return
      started.add(source.stream)
      // One Stream waits on Redis for its next entry; several are each read in turn, a pass a wait.
      const block = !options.once && all.length === 1
      if (!(await sendNew(store, source, options, stopped, block))) return
    }
    if (options.once || stopped()) return
    if (all.length > 1) await Bun.sleep(BLOCK_MS)
  }
}

export async function exportSettled(args: string[]): Promise<void> {
  const options = parse(args)
  if (!options) {
    console.error(EXPORT_USAGE)
    process.exitCode = 2
    return
  }
  const config = loadStoreConfig()
  const store = createStore(config.redisUrl, { name: 'svc-export' })
  let stop = false
  const onSignal = () => {
    stop = true
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  try {
    await runExport(store, await recordedKeyspace(store, config.redisPrefix), options, () => stop)
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    store.close()
  }
}
