// A video job's price as the upstream's quote endpoint answers it (`POST /video/quote`: `{quote}`
// in USD, no charge, no job; 1 DIEM = $1), asked of the job's own supplier key right before its
// queue, so that the job's burn is what that key is billed (the catalog sync asks the same endpoint
// to price a model: catalog/video-prices.ts).
// A quote is an upstream's word, read as one that may lie: only a finite non-negative number at
// most the catalog's bound is a price (catalog/video-prices.ts readQuote).
import { QUOTE_BODY_BYTES, readQuote } from '../catalog/video-prices.ts'
import type { MicroDiem } from '../money/units.ts'
import { callSupplier, type SupplierOutcome } from './supplier.ts'

export type QuoteFailure = Extract<SupplierOutcome, { ok: false }>

/** A quote in micro-DIEM: rounded up (what may be billed at most) and down (what surely is). */
export type Quoted = { ok: true; up: number; down: number }

/** A failure of the quote's own, before any byte of the job: the next offer may be tried. */
export const quoteFailure = (code: string): QuoteFailure => ({
  ok: false,
  code,
  clientError: false,
  status: null,
  message: code,
  balance: null,
})

/** The fields the upstream prices a job by, as the job sends them. */
export function quoteBody(job: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = {}
  for (const field of ['model', 'duration', 'resolution', 'aspect_ratio', 'audio']) {
    if (job[field] !== undefined) body[field] = job[field]
  }
  return body
}

/** Asks `baseUrl`'s quote endpoint with `apiKey`: the job's price, or why there is none. */
export async function askVideoQuote(call: {
  baseUrl: string
  apiKey: string
  body: Record<string, unknown>
  signal: AbortSignal
  timeoutMs: number
}): Promise<Quoted | QuoteFailure> {
  const outcome = await callSupplier({
    ...call,
    path: '/video/quote',
    stream: false,
    maxBodyBytes: QUOTE_BODY_BYTES,
  })
  if (!outcome.ok) return outcome
  let quoted: ReturnType<typeof readQuote> = null
  try {
    quoted = readQuote(await outcome.response.json())
  } catch {
    // Not JSON: no price.
  }
  return quoted ? { ok: true, ...quoted } : quoteFailure('upstream_bad_quote')
}

/**
 * The admitted key's quote for the job, checked against its hold: the burn (rounded down: never
 * more than the key is billed), or a failure before any byte (a quote that is missing, no price, at
 * nothing, or above the hold: what the key would bill the buyer does not hold), and the next offer is tried.
 */
export async function quoteForKey(
  video: { holdDiem: number; upstreamBody: Record<string, unknown> },
  baseUrl: string,
  apiKey: string,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<{ ok: true; burn: MicroDiem } | QuoteFailure> {
  const quoted = await askVideoQuote({
    baseUrl,
    apiKey,
    body: quoteBody(video.upstreamBody),
    signal,
    timeoutMs,
  })
  if (!quoted.ok) return quoted
  // Priced at nothing, the job would bill its buyer nothing while the key may still be billed: no
  // price, as the catalog's sync reads it.
  if (quoted.down === 0) return quoteFailure('upstream_bad_quote')
  if (quoted.up > video.holdDiem) return quoteFailure('upstream_quote_above_hold')
  return { ok: true, burn: quoted.down as MicroDiem }
}
