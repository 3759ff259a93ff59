// One price as the upstream's `/models` lists it: a `{usd, diem}` pair, read into integer
// micro-DIEM, or nothing when the pair cannot say what a key is billed.
import { parseMicros } from '../money/units.ts'

interface UpstreamPrice {
  usd?: unknown
  diem?: unknown
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** One amount of a price pair in micro units: absent (undefined), readable, or null when it is not. */
function amount(raw: unknown): number | undefined | null {
  if (raw === undefined || raw === null) return undefined
  if (typeof raw !== 'number' && typeof raw !== 'string') return null
  const micros = parseMicros(raw)
  return micros !== null && micros >= 0 ? micros : null
}

// DIEM is the unit billing counts in, usd the fallback. 1 DIEM = $1 of list price: a pair whose
// amounts disagree (or one of them unreadable) does not say which the key is billed, so it is no price.
export function price(value: unknown): number | undefined {
  const p = isRecord(value) ? (value as UpstreamPrice) : undefined
  const diem = amount(p?.diem)
  const usd = amount(p?.usd)
  if (diem === null || usd === null) return undefined
  if (diem !== undefined && usd !== undefined && diem !== usd) return undefined
  return diem ?? usd
}
