// What GET /v1/agent/usage and GET /v1/supplier/earnings add up, kept beside each Stream: its
// entries folded per UTC hour into integer sums (a hash: `<hour>:<name>` -> sum), with the id of
// the last entry folded. A read folds only the entries past that cursor (lua/fold-sums.lua adds
// them only if no other read moved it meanwhile), then answers from the hours: its cost is what
// was appended since the last read, not the window's every entry, as a scan of the Stream was.
//
// The answer equals a scan of the Stream from `fromMs` exactly. Sums are kept for the largest
// window and a day more (a reader whose clock is past midnight prunes no day a slower one shows).
// The hour that holds the lower bound (the record retention's, `now - retention`, or the Stream's
// first entry where it was trimmed past it) is counted from the Stream itself: from the bound to
// the hour's end, or, where the Stream still holds the whole hour and that is the shorter read,
// the hour's sum less the entries before the bound (where no trim took any of them meanwhile). An
// entry that counts at an earlier hour than its id's (a fill posted after its clear: Fold's `at`)
// is summed in its id's hour and also as moved, so the bounds stay ones on ids. A Stream that
// lost entries the sums hold other than by a trim of its oldest (deleted and made again, or an
// XDEL that raised its max-deleted-entry-id) is folded again. An XDEL below an earlier one leaves that id as it was and
// is not seen: the gateway deletes no entry but a migration's new last one (migrate-apart's
// markTrimmed), so only an entry deleted by hand can be counted after it is gone.

import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { type Entry, entryMs, fieldsOf } from './activity.ts'
import { STATS_WINDOWS } from './stats.ts'

export const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000
/** The days of sums kept: the largest window's, and one more. */
export const KEPT_DAYS = Math.max(...Object.values(STATS_WINDOWS)) + 1
const PAGE = 1_000

/**
 * An entry's amounts by name (none for an entry that counts nothing); integers. `at`: the time it
 * counts at where that is not its id's (a fill posted after its clear: the clear's), or undefined.
 */
export type Fold = ((fields: Record<string, string>, add: (name: string, amount: number) => void) => void) & {
  at?: (fields: Record<string, string>) => number | undefined
}

/** Sums by hour (its first ms), then by name. */
export type HourSums = Map<number, Map<string, number>>

/** Stream ids compared: negative, zero or positive as `a` is before, at or after `b`. */
export function compareIds(a: string, b: string): number {
  const [am, as = '0'] = a.split('-')
  const [bm, bs = '0'] = b.split('-')
  const ms = Number(am) - Number(bm)
  if (ms !== 0) return ms
  const [x, y] = [BigInt(as), BigInt(bs)]
  return x < y ? -1 : x > y ? 1 : 0
}

interface StreamInfo {
  first: string | null
  /** Nothing ever trimmed nor deleted: entries-added is its length. */
  holdsAll: boolean
  last: string
  maxDeleted: string | null
}

async function streamInfo(store: Store, stream: string): Promise<StreamInfo | null> {
  let info: unknown[]
  try {
    info = (await store.xinfo('STREAM', stream)) as unknown[]
  } catch (error) {
    if (String(error).includes('no such key')) return null
    throw error
  }
  const field = (name: string) => {
    const at = info.indexOf(name)
    return at < 0 ? undefined : info[at + 1]
  }
  const first = field('first-entry') as Entry | null | undefined
  const maxDeleted = field('max-deleted-entry-id')
  return {
    first: first ? first[0] : null,
    holdsAll: Number(field('entries-added')) === Number(field('length')),
    last: String(field('last-generated-id')),
    maxDeleted: typeof maxDeleted === 'string' && maxDeleted !== '0-0' ? maxDeleted : null,
  }
}

const hourOf = (ms: number) => Math.floor(ms / HOUR_MS)

/**
 * Entries' amounts added into `into`, by `<hour>:<name>`, the hour the id's. One that counts at an
 * earlier hour (Fold's `at`) is also added as moved there, `<hour>:><earlier hour>:<name>`: every
 * bound stays one on ids, and a read moves it (addField).
 */
function foldEntries(entries: Entry[], fold: Fold, into: Map<string, number>) {
  const put = (field: string, amount: number) => into.set(field, (into.get(field) ?? 0) + amount)
  for (const [id, flat] of entries) {
    const hour = hourOf(entryMs(id))
    const fields = fieldsOf(flat)
    const at = fold.at?.(fields)
    const moved =
      at !== undefined && Number.isSafeInteger(at) && at >= 0 && hourOf(at) < hour ? hourOf(at) : null
    fold(fields, (name, amount) => {
      put(`${hour}:${name}`, amount)
      if (moved !== null) put(`${hour}:>${moved}:${name}`, amount)
    })
  }
}

/** A sum of `<hour>:<name>` added into `sums`: a moved one (`>earlier:name`) out of its hour and into the earlier. */
function addField(sums: HourSums, hour: number, name: string, amount: number) {
  const add = (h: number, n: string, a: number) => {
    const names = sums.get(h * HOUR_MS) ?? new Map<string, number>()
    names.set(n, (names.get(n) ?? 0) + a)
    sums.set(h * HOUR_MS, names)
  }
  const moved = /^>(\d+):(.*)$/s.exec(name)
  if (!moved) return add(hour, name, amount)
  add(hour, moved[2]!, -amount)
  add(Number(moved[1]), moved[2]!, amount)
}

/** Every entry of the Stream from `start` to `end` (XRANGE bounds), a page at a time. */
async function readRange(
  store: Store,
  stream: string,
  start: string,
  end: string,
  visit: (e: Entry[]) => void,
) {
  for (;;) {
    const entries = (await store.xrange(stream, start, end, 'COUNT', PAGE)) as Entry[]
    visit(entries)
    if (entries.length < PAGE) return
    start = `(${entries.at(-1)![0]}`
  }
}

/**
 * The sums of the Stream's entries from `fromMs` on (as Redis holds them now), by hour: the new
 * entries folded into the sums at `sumsKey` first. `nowMs`: Redis's clock, read once by the caller.
 */
export async function streamSums(
  store: Store,
  stream: string,
  sumsKey: string,
  fold: Fold,
  nowMs: number,
  fromMs: number,
): Promise<HourSums> {
  const keptFrom = (Math.floor(nowMs / DAY_MS) - (KEPT_DAYS - 1)) * DAY_MS
  const ttlMs = KEPT_DAYS * DAY_MS
  let info: StreamInfo | null
  let stored: Record<string, string>
  for (;;) {
    const caught = await catchUp(store, stream, sumsKey, fold, keptFrom, ttlMs)
    info = caught.info
    stored = await store.hgetall(sumsKey)
    // Reset or deleted since the fold (a cursor gone or behind, another generation): those sums
    // hold less than the Stream up to where this read folded; fold again.
    const behind = caught.cursor !== null && (!stored.cursor || compareIds(stored.cursor, caught.cursor) < 0)
    if (!behind && (stored.gen ?? '') === caught.gen) break
  }
  const sums: HourSums = new Map()
  if (info?.first == null || !stored.cursor) return sums
  const cursor = stored.cursor
  const from = lowerBound(info, info.first, `${fromMs}-0`, stored.start)
  const edge = hourOf(entryMs(from))
  const stale: string[] = []
  // The edge hour's own sums: whole where it starts at the bound, else as the edge read below says.
  const edgeFields: [string, number][] = []
  for (const [field, value] of Object.entries(stored)) {
    const match = /^(\d+):(.*)$/s.exec(field)
    if (!match) continue
    const hour = Number(match[1])
    if (hour * HOUR_MS < keptFrom) stale.push(field)
    if (hour === edge) edgeFields.push([match[2]!, Number(value)])
    if (hour > edge) addField(sums, hour, match[2]!, Number(value))
  }
  if (stale.length > 0) await store.hdel(sumsKey, ...stale)
  if (from === `${edge * HOUR_MS}-0`)
    for (const [name, amount] of edgeFields) addField(sums, edge, name, amount)
  else {
    // The edge hour: its entries from the bound, or its sum less those before (the shorter read,
    // and only where the Stream still holds the hour's every entry: nothing before it trimmed).
    const edgeStart = edge * HOUR_MS
    const whole = compareIds(info.first, `${edgeStart}-0`) <= 0
    let below = whole && entryMs(from) - edgeStart < edgeStart + HOUR_MS - entryMs(from)
    const part = new Map<string, number>()
    const end = (id: string) => (compareIds(id, cursor) < 0 ? id : cursor)
    if (below) {
      // Those before the bound, none past the cursor (the hour's sum holds no later one).
      if (compareIds(`${edgeStart}-0`, cursor) <= 0) {
        const last = compareIds(from, cursor) <= 0 ? `(${from}` : cursor
        await readRange(store, stream, `${edgeStart}`, last, (e) => foldEntries(e, fold, part))
      }
      // A trim since the Stream was read (a clear's MINID at the retention's bound) may have taken
      // some of them: the hour's sum still holds what no read subtracts. Read from the bound then.
      const [first] = (await store.xrange(stream, '-', '+', 'COUNT', 1)) as Entry[]
      if (!first || compareIds(first[0], `${edgeStart}-0`) > 0) {
        below = false
        part.clear()
      }
    }
    if (!below && compareIds(from, cursor) <= 0) {
      await readRange(store, stream, from, end(`${edgeStart + HOUR_MS - 1}-18446744073709551615`), (e) =>
        foldEntries(e, fold, part),
      )
    }
    if (below) for (const [name, amount] of edgeFields) addField(sums, edge, name, amount)
    for (const [field, amount] of part) {
      const name = field.slice(field.indexOf(':') + 1)
      addField(sums, edge, name, below ? -amount : amount)
    }
    if (!sums.has(edgeStart)) sums.set(edgeStart, new Map())
  }
  // A name that sums to nothing had no entry from the bound on (a missing name reads as 0).
  for (const names of sums.values()) for (const [name, amount] of names) if (amount === 0) names.delete(name)
  return sums
}

/**
 * Where the answer's entries start: `bound`, or past it the Stream's first entry (an older one may
 * still be in the sums, trimmed since it was folded; a trim leaves no trace but the count of
 * entries added), or that entry's hour where the Stream never lost an entry and the sums began
 * with it: that hour's sum is then exact.
 */
function lowerBound(info: StreamInfo, first: string, bound: string, start: string | undefined): string {
  if (compareIds(first, bound) <= 0) return bound
  const hourStart = `${hourOf(entryMs(first)) * HOUR_MS}-0`
  const exact = info.holdsAll && start === first
  return exact && compareIds(hourStart, bound) > 0 ? hourStart : first
}

/**
 * Folds the Stream's entries past the cursor into the sums, a page at a time, until none is left;
 * drops the sums first where the Stream lost entries they hold. The Stream as read last, null if none.
 */
async function catchUp(
  store: Store,
  stream: string,
  sumsKey: string,
  fold: Fold,
  keptFrom: number,
  ttlMs: number,
): Promise<{ info: StreamInfo | null; cursor: string | null; gen: string }> {
  const send = (
    expected: string | null,
    gen: string,
    next: string,
    deleted: string | null,
    adds: Map<string, number>,
    start?: string,
  ) =>
    runScript(
      store,
      'foldSums',
      [sumsKey],
      {
        expected: expected ?? '',
        gen,
        cursor: next,
        reset: deleted === null ? '0' : '1',
        deleted: deleted ?? '',
        ttlMs,
        start: start ?? '',
      },
      [...adds].flat(),
    ).then(Number)
  for (;;) {
    const [cursor = null, deleted = null, gen = ''] = await store.hmget(sumsKey, 'cursor', 'deleted', 'gen')
    const info = await streamInfo(store, stream)
    // Made again (its ids restart below the cursor), gone, or an entry deleted that is not before
    // its first one (a trim drops only the oldest): the sums no longer match what the Stream holds.
    const remade = cursor !== null && (info === null || compareIds(cursor, info.last) > 0)
    const holed =
      info?.maxDeleted != null &&
      info.first !== null &&
      compareIds(info.maxDeleted, info.first) >= 0 &&
      info.maxDeleted !== deleted
    if (remade || holed) {
      await send(cursor, gen ?? '', '', info?.maxDeleted ?? '', new Map())
      continue
    }
    if (info === null) return { info, cursor: null, gen: gen ?? '' }
    let at = cursor
    for (;;) {
      const start = at === null || compareIds(at, `${keptFrom}-0`) < 0 ? `${keptFrom}` : `(${at}`
      const entries = (await store.xrange(stream, start, '+', 'COUNT', PAGE)) as Entry[]
      if (entries.length === 0) return { info, cursor: at, gen: gen ?? '' }
      const adds = new Map<string, number>()
      foldEntries(entries, fold, adds)
      const last = entries.at(-1)![0]
      // Another read folded past `at` meanwhile: nothing written; read the cursor again.
      if ((await send(at, gen ?? '', last, null, adds, entries[0]![0])) === 0) break
      at = last
      if (entries.length < PAGE) return { info, cursor: at, gen: gen ?? '' }
    }
  }
}
