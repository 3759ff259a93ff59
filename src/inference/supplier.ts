// One call to a supplier's upstream, classified: a usable response, or a failure before any byte
// that the dispatcher may fall forward from. The upstream key is used here and nowhere else.
import { type MicroDiem, parseMicros } from '../money/units.ts'
import { type UpstreamResponse, upstreamRequest } from '../upstream/client.ts'

export interface SupplierCall {
  baseUrl: string
  apiKey: string
  path: string
  body: Record<string, unknown>
  stream: boolean
  signal: AbortSignal
  /** Buffered: the whole answer; streamed: the head and the first body bytes. */
  timeoutMs: number
}

export type SupplierOutcome =
  | {
      ok: true
      response: UpstreamResponse
      preBalance: MicroDiem | null
    }
  | {
      ok: false
      /** Kept on the attempt record; never shown with the supplier's identity. */
      code: string
      /** True when falling forward is pointless: the request itself was refused. */
      clientError: boolean
      status: number | null
      message: string
      /** The upstream balance when the failure tells it (402: nothing left). */
      balance: MicroDiem | null
    }

export function balanceHeader(response: UpstreamResponse): MicroDiem | null {
  const raw = response.header('x-venice-balance-diem')
  const micros = raw === null ? null : parseMicros(raw)
  return micros === null || micros < 0 ? null : (micros as MicroDiem)
}

async function errorMessage(response: UpstreamResponse): Promise<string> {
  try {
    const text = (await response.text()).slice(0, 2_000)
    const body = JSON.parse(text) as { error?: unknown }
    const error = body.error
    if (typeof error === 'string') return error
    if (error && typeof (error as { message?: unknown }).message === 'string')
      return (error as { message: string }).message
    return text.slice(0, 200)
  } catch {
    return `status ${response.status}`
  }
}

export async function callSupplier(call: SupplierCall): Promise<SupplierOutcome> {
  let response: UpstreamResponse
  try {
    // Redirects are not followed: a supplier's base URL is what the operator posted.
    response = await upstreamRequest(`${call.baseUrl}${call.path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${call.apiKey}`,
        'content-type': 'application/json',
        accept: call.stream ? 'text/event-stream' : 'application/json',
      },
      body: JSON.stringify(call.body),
      signal: call.signal,
      // Buffered, the deadline covers the whole answer and ends once all of it is in. Streamed, the
      // head and the first body bytes: then the relay's idle watch takes over, so a stream that
      // runs longer than the first-byte timeout is never cut.
      deadline: { ms: call.timeoutMs, until: call.stream ? 'body' : 'end' },
    })
  } catch (error) {
    const name = (error as Error).name
    const code =
      name === 'TimeoutError'
        ? 'upstream_timeout'
        : name === 'AbortError'
          ? 'client_closed'
          : 'upstream_unreachable'
    return { ok: false, code, clientError: false, status: null, message: code, balance: null }
  }
  const preBalance = balanceHeader(response)
  if (response.status >= 200 && response.status < 300) return { ok: true, response, preBalance }

  // Read to its end or failed, the answer's deadline is over either way.
  const message = await errorMessage(response)
  const status = response.status
  if (status === 402)
    return {
      ok: false,
      code: 'upstream_out_of_balance',
      clientError: false,
      status,
      message,
      balance: 0 as MicroDiem,
    }
  if (status === 429)
    return {
      ok: false,
      code: 'upstream_rate_limited',
      clientError: false,
      status,
      message,
      balance: preBalance,
    }
  // A 400 or 422 is about the request itself: another supplier would refuse it too.
  if (status === 400 || status === 422)
    return { ok: false, code: 'upstream_rejected', clientError: true, status, message, balance: preBalance }
  return { ok: false, code: `upstream_${status}`, clientError: false, status, message, balance: preBalance }
}
