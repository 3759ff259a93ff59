// What the simulated supplier charges for a video job. Like the upstream, it publishes no video
// price in `/models`: `POST /video/quote` answers the price of a job in USD (no charge, no job),
// and `POST /video/queue` debits exactly that. The price comes from a table of its own, per second
// by resolution, plus a per-second audio price on a model that makes audio.
import { formatMicros } from '../money/units.ts'
import type { VeniceModel } from './models.ts'

interface SimVideoPrice {
  /** Micro-DIEM per second at each resolution the model renders. */
  perSecond: Record<string, number>
  /** The resolution of a job that names none. */
  defaultResolution: string
  /** Micro-DIEM per second for audio; absent: the model makes no audio. */
  audioPerSecond?: number
}

export const SIM_VIDEO_PRICES: Record<string, SimVideoPrice> = {
  'wan-2.1-video': { perSecond: { '480p': 30_000, '720p': 50_000 }, defaultResolution: '720p' },
}

/** Seconds of a Venice duration (`5s`, `10s`) or a plain number of seconds. */
export function durationSeconds(value: unknown): number | null {
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value : ''
  const match = /^(\d{1,3})s?$/.exec(text)
  return match ? Number(match[1]) : null
}

/** A job's parameters as the quote and the queue read them. */
export interface SimVideoParams {
  duration?: unknown
  resolution?: unknown
  audio?: unknown
}

/** The job's price in micro-DIEM, or why the upstream refuses to price it. */
export function simVideoPrice(
  model: VeniceModel,
  params: SimVideoParams,
): { micros: number; seconds: number } | { error: string } {
  const table = SIM_VIDEO_PRICES[model.id]
  if (!table) return { error: 'Specified model not found' }
  const seconds = durationSeconds(params.duration)
  if (seconds === null || seconds === 0) return { error: 'duration is required' }
  const resolution = params.resolution ?? table.defaultResolution
  // Own fields only: a resolution named like an object's field (`toString`) is no resolution.
  const perSecond =
    typeof resolution === 'string' && Object.hasOwn(table.perSecond, resolution)
      ? table.perSecond[resolution]
      : undefined
  if (perSecond === undefined) return { error: `resolution must be one of ${Object.keys(table.perSecond)}` }
  if (params.audio !== undefined && typeof params.audio !== 'boolean')
    return { error: 'audio must be a boolean' }
  if (params.audio === true && table.audioPerSecond === undefined)
    return { error: 'this model makes no audio' }
  const audio = params.audio === true ? table.audioPerSecond! : 0
  return { micros: (perSecond + audio) * seconds, seconds }
}

/** The quote as the upstream answers it: a USD number (its micro-DIEM, written out). */
export const quoteNumber = (micros: number) => Number(formatMicros(micros))
