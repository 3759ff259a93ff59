// The supplier calls' HTTP/1.1 client: keep-alive connections per origin, on the main thread's
// own sockets (Bun.connect). Bun's fetch runs every call on a separate HTTP thread and holds a
// response buffer, a body stream and a read view per open stream; here the bytes go from the
// socket to the relay with nothing in between (see BENCHMARKS.md, "Supplier calls on our own HTTP
// client").
//
// One request per connection at a time. A connection goes back to its origin's idle list only
// when its answer ended by its own framing and allows keep-alive; anything else closes it. A
// reused connection that closes before the first byte of an answer (the server dropped it while
// idle) is retried once on a new one. TLS is verified against the system's CAs and the host name.
// Proxies (HTTP(S)_PROXY) are not used: suppliers are called directly.
//
// The jobs, one module each: origin.ts (a URL's origin and target), pool.ts (idle connections),
// connection.ts (one socket), deadline.ts (the call's timer), exchange.ts (a request and its
// answer), response-parser.ts (HTTP/1.1 answers). This module is the API the gateway calls.
import { openInTime } from './connection.ts'
import { Deadline } from './deadline.ts'
import { exchangeOn, requestText } from './exchange.ts'
import { type Origin, targetOf } from './origin.ts'
import { takeIdle } from './pool.ts'

export { UpstreamBodyTooLarge, UpstreamConnectionError } from './errors.ts'
export { closeIdleUpstreams } from './pool.ts'

export interface UpstreamRequest {
  method: 'GET' | 'POST'
  headers: Record<string, string>
  body?: string
  /** Aborting it ends the call at once, head or body, with the signal's reason as the error. */
  signal?: AbortSignal
  /**
   * The call fails with a TimeoutError unless, within `ms` of the request, the first bytes of its
   * body are in (`until: 'body'`, a stream; for an error status, the whole of it) or its whole
   * answer is (`'end'`). One timer, cleared as soon as that is so.
   */
  deadline?: { ms: number; until: 'body' | 'end' }
  /**
   * The most body bytes the call takes, counted as they arrive: past it, or at a Content-Length
   * above it, the connection closes and reads reject with UpstreamBodyTooLarge. A chunked body's
   * framing is bounded alike, by as many bytes again.
   */
  maxBodyBytes?: number
}

export interface UpstreamResponse {
  readonly status: number
  /** A header by its name (any case); a repeated header's values joined with ", ". */
  header(name: string): string | null
  /** The next bytes of the body, null once it has ended; rejects when the call broke first. */
  read(): Promise<Uint8Array | null>
  /** The rest of the body as UTF-8 text. */
  text(): Promise<string>
  json(): Promise<unknown>
  /** Stops the call: the connection closes, a pending read gets null. Safe to call again. */
  cancel(): void
}

/** The request on a new connection. */
async function onNewConnection(
  origin: Origin,
  request: string,
  init: UpstreamRequest,
  deadline: Deadline | undefined,
) {
  const connection = await openInTime(origin, init.signal, deadline)
  return exchangeOn(connection, request, init, deadline)
}

/** Sends one request; resolves once the answer's head is in. */
export async function upstreamRequest(url: string, init: UpstreamRequest): Promise<UpstreamResponse> {
  const signal = init.signal
  if (signal?.aborted) throw signal.reason
  const { origin, target } = targetOf(url)
  const request = requestText(origin, target, init)
  const deadline = init.deadline && new Deadline(init.deadline.ms, init.deadline.until === 'body')
  const reused = takeIdle(origin)
  try {
    const first = reused
      ? exchangeOn(reused, request, init, deadline)
      : await onNewConnection(origin, request, init, deadline)
    try {
      return await first.head
    } catch (error) {
      // The server closed an idle connection as we sent on it: nothing reached it, so once more.
      if (!reused || !first.exchange.untouched || signal?.aborted) throw error
      if ((error as Error).name === 'TimeoutError' || (deadline && !deadline.restart())) throw error
      const second = await onNewConnection(origin, request, init, deadline)
      return await second.head
    }
  } catch (error) {
    deadline?.end()
    throw error
  }
}
