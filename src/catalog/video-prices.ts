// Video prices, asked of the upstream's quote endpoint by the sync (its `/models` lists none): each
// duration a model offers, at each resolution it lists, audio off and on where it makes audio. A
// model any of whose quotes fails or is no price (not a finite positive number, or past the bound)
// is not live: its jobs could not be held at what the upstream bills them. Without an upstream key
// the quote endpoint cannot be asked: a model keeps the prices the catalog already holds, else it is
// not live.
import { formatMicros, usdNumberToMicros } from '../money/units.ts'
import { readCapped } from '../read-capped.ts'
import type { CatalogEntry, CatalogRow, VideoPrices } from './entry.ts'

/** The most a video job may be priced at: $1,000. A quote past it is no price. */
export const MAX_VIDEO_QUOTE_MICROS = 1_000_000_000
/** A quote is a few bytes of JSON: an answer past this is not one. */
export const QUOTE_BODY_BYTES = 4 * 1024

/**
 * A quote endpoint's answer (`{quote}`, USD = DIEM) in micro-DIEM, rounded up (what may be billed at
 * most) and down (what surely is); null unless `quote` is a finite non-negative number within the bound.
 */
export function readQuote(answer: unknown): { up: number; down: number } | null {
  const quote =
    typeof answer === 'object' && answer !== null ? (answer as { quote?: unknown }).quote : undefined
  const up = usdNumberToMicros(quote, 'up', MAX_VIDEO_QUOTE_MICROS)
  const down = usdNumberToMicros(quote, 'down', MAX_VIDEO_QUOTE_MICROS)
  return up === null || down === null ? null : { up, down }
}

/** The durations the upstream offers a model that lists none. */
const DEFAULT_DURATIONS = ['5s', '10s']
/** The most quotes one model may need; a model that needs more is not priced. */
const MAX_QUOTES_PER_MODEL = 32
/** Quotes asked at once, over every model. */
const PARALLEL = 8

export interface VideoQuoteSource {
  upstreamUrl: string
  upstreamApiKey?: string | undefined
  timeoutMs?: number
}

/** One quote a model's price needs: the table cell it fills and the body that asks for it. */
interface Cell {
  duration: string
  resolution: string | null
  body: Record<string, unknown>
}

const strings = (value: unknown): string[] | null =>
  Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string' && v !== '')
    ? (value as string[])
    : null

/** A constraint's durations as `5s` strings, or null when one of them is not a duration. */
function durationsOf(value: unknown): string[] | null {
  if (value === undefined) return DEFAULT_DURATIONS
  if (!Array.isArray(value) || value.length === 0) return null
  const out: string[] = []
  for (const d of value) {
    const match = /^([1-9]\d{0,2})s?$/.exec(typeof d === 'number' || typeof d === 'string' ? String(d) : '')
    if (!match) return null
    out.push(`${match[1]}s`)
  }
  return [...new Set(out)]
}

/** The quotes a video model's price needs, or null when its constraints cannot be read. */
function cellsOf(row: CatalogRow): Cell[] | null {
  const constraints = row.constraints ?? {}
  const durations = durationsOf(constraints.durations)
  const resolutions = constraints.resolutions === undefined ? [null] : strings(constraints.resolutions)
  if (!durations || !resolutions) return null
  const aspect = strings(constraints.aspectRatios)?.[0]
  const audios = row.capabilities.supportsAudio === true ? [false, true] : [undefined]
  const cells: Cell[] = []
  for (const duration of durations)
    for (const resolution of resolutions)
      for (const audio of audios) {
        const body: Record<string, unknown> = { model: row.id, duration }
        if (resolution !== null) body.resolution = resolution
        if (aspect !== undefined) body.aspect_ratio = aspect
        if (audio !== undefined) body.audio = audio
        cells.push({ duration, resolution, body })
      }
  return cells.length <= MAX_QUOTES_PER_MODEL ? cells : null
}

/** The table and its public row from a model's quotes (rounded up: never held below the bill). */
function priced(entry: CatalogEntry, cells: Cell[], quotes: number[]): CatalogEntry {
  const table: VideoPrices = {}
  for (const [i, cell] of cells.entries()) {
    table[cell.duration] ??= {}
    const byResolution = table[cell.duration]!
    const key = cell.resolution ?? '*'
    byResolution[key] = Math.max(byResolution[key] ?? 0, quotes[i]!)
    byResolution['*'] = Math.max(byResolution['*'] ?? 0, quotes[i]!)
  }
  const pricing: NonNullable<CatalogRow['pricing']> = { currency: 'USD', unit: 'video' }
  for (const [duration, byResolution] of Object.entries(table)) {
    const { '*': most, ...tiers } = byResolution
    pricing[duration] =
      Object.keys(tiers).length > 0
        ? Object.fromEntries(Object.entries(tiers).map(([r, p]) => [r, formatMicros(p)]))
        : formatMicros(most!)
  }
  return { row: { ...entry.row, status: 'live', pricing }, prices: { perVideo: table } }
}

/** Not priced: listed, `coming_soon`. */
function unpriced(entry: CatalogEntry): CatalogEntry {
  const { pricing: _, ...row } = entry.row
  return { row: { ...row, status: 'coming_soon' }, prices: null }
}

/** One quote asked of the operator's upstream: rounded up (never held below its bill), or null. */
async function askQuote(source: VideoQuoteSource, apiKey: string, body: Record<string, unknown>) {
  const timeoutMs = source.timeoutMs ?? 10_000
  try {
    const response = await fetch(`${source.upstreamUrl}/video/quote`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    })
    if (response.status !== 200 || !response.body) return null
    const tooLarge = () => new Error('quote too large')
    const quoted = readQuote(
      JSON.parse((await readCapped(response.body, QUOTE_BODY_BYTES, tooLarge)).toString()),
    )
    // Priced at nothing, a job would bill its buyer nothing while the key may still be billed.
    return quoted && quoted.down > 0 ? quoted.up : null
  } catch {
    return null
  }
}

/** Runs `tasks` at most `parallel` at a time. */
async function pooled<T>(tasks: (() => Promise<T>)[], parallel: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length)
  let next = 0
  const worker = async () => {
    for (let i = next++; i < tasks.length; i = next++) results[i] = await tasks[i]!()
  }
  await Promise.all(Array.from({ length: Math.min(parallel, tasks.length) }, worker))
  return results
}

/**
 * The stored entry of a model that is listed as it was when priced (the same constraints and audio),
 * with its prices: what a sync that cannot ask the quotes keeps.
 */
function pricedBefore(entry: CatalogEntry, known: ReadonlyMap<string, CatalogEntry> | undefined) {
  const stored = known?.get(entry.row.id)
  if (!stored?.prices?.perVideo || Object.keys(stored.prices.perVideo).length === 0) return undefined
  const shape = (row: CatalogRow) =>
    JSON.stringify([row.constraints ?? null, row.capabilities.supportsAudio ?? null])
  return shape(stored.row) === shape(entry.row) ? stored : undefined
}

/**
 * The entries with every video model awaiting its quotes (prices `{perVideo: {}}`) priced or not live.
 * Without an upstream key (a replica started without one) a model keeps the prices the catalog holds
 * for it (`known`), so one such replica's sync does not take video off the market.
 */
export async function priceVideoModels(
  entries: CatalogEntry[],
  source: VideoQuoteSource,
  known?: ReadonlyMap<string, CatalogEntry>,
): Promise<CatalogEntry[]> {
  const apiKey = source.upstreamApiKey
  if (!apiKey) {
    entries = entries.map((entry) => {
      const stored = entry.row.modality === 'video' ? pricedBefore(entry, known) : undefined
      return stored
        ? {
            row: { ...entry.row, status: stored.row.status, pricing: stored.row.pricing },
            prices: stored.prices,
          }
        : entry
    })
  }
  const waiting = entries.map((entry) => {
    const perVideo = entry.prices?.perVideo
    const awaiting = entry.row.modality === 'video' && perVideo && Object.keys(perVideo).length === 0
    return awaiting ? cellsOf(entry.row) : undefined
  })
  const tasks: (() => Promise<number | null>)[] = []
  for (const cells of waiting)
    for (const cell of cells ?? [])
      tasks.push(async () => (apiKey ? askQuote(source, apiKey, cell.body) : null))
  const quotes = await pooled(tasks, PARALLEL)
  let at = 0
  return entries.map((entry, i) => {
    const cells = waiting[i]
    if (cells === undefined) return entry
    if (cells === null) return unpriced(entry)
    const own = quotes.slice(at, at + cells.length)
    at += cells.length
    return own.every((q) => q !== null) ? priced(entry, cells, own as number[]) : unpriced(entry)
  })
}
