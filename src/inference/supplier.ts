// One call to a supplier's upstream, classified: a usable response, or a failure before any byte
// that the dispatcher may fall forward from. The upstream key is used here and nowhere else.
import { metrics } from '../metrics/gateway-metrics.ts'
import { type MicroDiem, parseDiemBalance } from '../money/units.ts'
import { UpstreamBodyTooLarge, type UpstreamResponse, upstreamRequest } from '../upstream/client.ts'

export interface SupplierCall {
  baseUrl: string
  apiKey: string
  path: string
  /** The request's JSON, or its text when made already. */
  body: Record<string, unknown> | string
  stream: boolean
  signal: AbortSignal
  /** Buffered: the whole answer; streamed: the head and the first body bytes. */
  timeoutMs: number
  /**
   * The most body bytes its answer may have, a chunked one's framing bounded by as much again.
   * Buffered, past it: upstream_too_large; streamed, the stream ends there as a broken one.
   */
  maxBodyBytes: number
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
  const told = response.header('x-venice-balance-diem')
  if (told === null) return null
  const balance = parseDiemBalance(told)
  // Sent, and not a balance: no balance rather than a wrong one, counted for the operator.
  if (balance === null) metrics.unreadBalances.inc({ where: 'answer' })
  return balance
}

/** An error body is read this far and no further: only its message is kept, for the log. */
const ERROR_BODY_BYTES = 4 * 1024
const MESSAGE_CHARS = 300

/** The first ERROR_BODY_BYTES of an error body; the connection closes if there is more. */
async function errorText(response: UpstreamResponse): Promise<string> {
  const parts: Uint8Array[] = []
  let length = 0
  try {
    for (let part = await response.read(); part; part = await response.read()) {
      parts.push(part.slice(0, ERROR_BODY_BYTES - length))
      length += part.length
      if (length >= ERROR_BODY_BYTES) {
        response.cancel()
        break
      }
    }
  } catch {
    // Broken or past the call's bound: what came is enough for a log line.
  }
  return Buffer.concat(parts).toString('utf8')
}

/** The supplier's own words about its error, bounded; they go to the log, never to a buyer. */
async function errorMessage(response: UpstreamResponse): Promise<string> {
  const text = await errorText(response)
  try {
    const error = (JSON.parse(text) as { error?: unknown }).error
    if (typeof error === 'string') return error.slice(0, MESSAGE_CHARS)
    if (error && typeof (error as { message?: unknown }).message === 'string')
      return (error as { message: string }).message.slice(0, MESSAGE_CHARS)
  } catch {
    // Not JSON, or cut at the bound.
  }
  return text === '' ? `status ${response.status}` : text.slice(0, MESSAGE_CHARS)
}

/**
 * A buffered answer read whole, within the call's bound, served again to whoever reads it: the
 * dispatcher parses it as it would the supplier's own body.
 */
class ReadAnswer implements UpstreamResponse {
  private taken = false

  constructor(
    private readonly answer: UpstreamResponse,
    private readonly body: Buffer,
  ) {}

  get status(): number {
    return this.answer.status
  }

  header(name: string): string | null {
    return this.answer.header(name)
  }

  read(): Promise<Uint8Array | null> {
    const first = !this.taken
    this.taken = true
    return Promise.resolve(first && this.body.length > 0 ? this.body : null)
  }

  text(): Promise<string> {
    this.taken = true
    return Promise.resolve(this.body.toString('utf8'))
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text())
  }

  cancel(): void {
    this.taken = true
  }
}

/** The whole of a buffered answer, or the failure code when it broke or passed the bound. */
async function wholeBody(response: UpstreamResponse): Promise<Buffer | string> {
  const parts: Uint8Array[] = []
  try {
    for (let part = await response.read(); part; part = await response.read()) parts.push(part)
  } catch (error) {
    if (error instanceof UpstreamBodyTooLarge) return 'upstream_too_large'
    return (error as Error).name === 'AbortError' ? 'client_closed' : 'upstream_broken_body'
  }
  const only = parts.length === 1 ? parts[0]! : null
  return only ? Buffer.from(only.buffer, only.byteOffset, only.byteLength) : Buffer.concat(parts)
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
      body: typeof call.body === 'string' ? call.body : JSON.stringify(call.body),
      signal: call.signal,
      // Buffered, the deadline covers the whole answer and ends once all of it is in. Streamed, the
      // head and the first body bytes: then the relay's idle watch takes over, so a stream that
      // runs longer than the first-byte timeout is never cut.
      deadline: { ms: call.timeoutMs, until: call.stream ? 'body' : 'end' },
      // A stream's frames are bounded one by one as they are parsed (upstream-events.ts); the whole
      // here, so a supplier that never stops (or pads its chunks' framing) is not read for ever.
      maxBodyBytes: call.maxBodyBytes,
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
  if (response.status >= 200 && response.status < 300) {
    if (call.stream) return { ok: true, response, preBalance }
    // Read here, within the bound, so that a body past it is a failure of its own before any byte.
    const body = await wholeBody(response)
    if (typeof body !== 'string') return { ok: true, response: new ReadAnswer(response, body), preBalance }
    return { ok: false, code: body, clientError: false, status: null, message: body, balance: null }
  }

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
