// The supplier calls' HTTP/1.1 client: keep-alive connections per origin, on the main thread's
// own sockets (Bun.connect). Bun's fetch runs every call on a separate HTTP thread and held 9-11
// KB more per open stream (a response buffer, a body stream, a 64 KB read view); here the
// bytes go from the socket to the relay with nothing in between (BENCHMARKS.md has the figures).
//
// One request per connection at a time. A connection goes back to its origin's idle list only
// when its answer ended by its own framing and allows keep-alive; anything else closes it. A
// reused connection that closes before the first byte of an answer (the server dropped it while
// idle) is retried once on a new one. TLS is verified against the system's CAs and the host name.
// Proxies (HTTP(S)_PROXY) are not used: suppliers are called directly.
import type { Socket, SocketHandler } from 'bun'
import { type ResponseHead, ResponseParser } from './response-parser.ts'

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

/** The connection broke, or the answer was not HTTP/1.1: the call failed before or during the body. */
export class UpstreamConnectionError extends Error {
  override readonly name = 'UpstreamConnectionError'
}

const utf8 = new TextDecoder()

/** Past this much unread body, reading from the socket pauses until the consumer catches up. */
const PAUSE_AT_BYTES = 64 * 1024
const MAX_IDLE_PER_ORIGIN = 128
/** Idle connections close after this long (servers drop theirs after 5–60 s). */
const IDLE_TIMEOUT_S = 30

interface Origin {
  key: string
  hostname: string
  port: number
  tls: boolean
  /** The Host header. */
  host: string
}

const origins = new Map<string, Origin>()
const idle = new Map<string, Connection[]>()

function originOf(url: URL): Origin {
  const key = `${url.protocol}//${url.host}`
  let origin = origins.get(key)
  if (!origin) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`not an HTTP URL: ${key}`)
    const tls = url.protocol === 'https:'
    origin = {
      key,
      hostname: url.hostname.replace(/^\[|\]$/g, ''),
      port: Number(url.port || (tls ? 443 : 80)),
      tls,
      host: url.host,
    }
    origins.set(key, origin)
  }
  return origin
}

/** One socket to an origin and the exchange it carries, if any. */
class Connection {
  socket: Socket<Connection> | null = null
  exchange: Exchange | null = null
  closed = false
  /** Bytes not taken by the socket yet (a full send buffer). */
  private unsent: Uint8Array | null = null

  constructor(readonly origin: Origin) {}

  /** Settles the promise `open` returned, once. */
  private opening: { resolve: (c: Connection) => void; reject: (e: Error) => void } | null = null

  /** Connects; resolves once the connection can carry a request (TLS: after the handshake). */
  open(): Promise<Connection> {
    const origin = this.origin
    return new Promise((resolve, reject) => {
      this.opening = { resolve, reject }
      Bun.connect<Connection>({
        hostname: origin.hostname,
        port: origin.port,
        data: this,
        ...(origin.tls ? { tls: { serverName: origin.hostname } } : {}),
        socket: HANDLERS,
      }).catch((error: Error) =>
        this.opened(
          error instanceof UpstreamConnectionError
            ? error
            : new UpstreamConnectionError(`cannot connect to ${origin.host}: ${error.message}`),
        ),
      )
    })
  }

  /** Open (no error) or not: the first call settles `open`'s promise, later ones do nothing. */
  opened(error?: Error): void {
    const opening = this.opening
    if (!opening) return
    this.opening = null
    if (error) opening.reject(error)
    else opening.resolve(this)
  }

  /** The request, one write; what the socket does not take now goes on `drain`. */
  send(request: string): void {
    const socket = this.socket!
    socket.timeout(0)
    const written = Math.max(0, socket.write(request))
    // The usual case: all taken, and no bytes were made of the string here.
    if (written < Buffer.byteLength(request)) this.unsent = Buffer.from(request).subarray(written)
  }

  flush(socket: Socket<Connection>): void {
    if (!this.unsent) return
    const written = Math.max(0, socket.write(this.unsent))
    this.unsent = written < this.unsent.length ? this.unsent.subarray(written) : null
  }

  onClose(error: Error | null): void {
    if (this.closed) return
    this.closed = true
    const list = idle.get(this.origin.key)
    const at = list?.indexOf(this) ?? -1
    if (at >= 0) list!.splice(at, 1)
    this.exchange?.onClose(error)
  }

  /** Back to the idle list, or closed when the list is full. */
  release(): void {
    this.exchange = null
    if (this.closed) return
    let list = idle.get(this.origin.key)
    if (!list) {
      list = []
      idle.set(this.origin.key, list)
    }
    if (list.length >= MAX_IDLE_PER_ORIGIN) {
      this.close()
      return
    }
    this.socket!.timeout(IDLE_TIMEOUT_S)
    list.push(this)
  }

  close(): void {
    this.closed = true
    this.exchange = null
    this.socket?.terminate()
  }
}

/**
 * The sockets' handlers, one set for every connection (each socket's `data` is its Connection):
 * no closures made per connection.
 */
const HANDLERS: SocketHandler<Connection> = {
  open(socket) {
    const connection = socket.data
    connection.socket = socket
    // Given up while it connected (an abort, the deadline): closed unused.
    if (connection.closed) socket.terminate()
    else if (!connection.origin.tls) connection.opened()
  },
  handshake(socket, success, error) {
    const connection = socket.data
    if (success) {
      connection.opened()
      return
    }
    socket.terminate()
    connection.opened(
      new UpstreamConnectionError(
        `TLS to ${connection.origin.host} refused: ${error?.message ?? 'handshake failed'}`,
      ),
    )
  },
  data(socket, bytes) {
    // Bytes on an idle connection answer nothing that was asked: it is not reused.
    const exchange = socket.data.exchange
    if (exchange) exchange.onData(bytes)
    else socket.terminate()
  },
  drain(socket) {
    socket.data.flush(socket)
  },
  close(socket) {
    const connection = socket.data
    connection.onClose(null)
    connection.opened(new UpstreamConnectionError(`connection to ${connection.origin.host} closed`))
  },
  error(socket, error) {
    const connection = socket.data
    connection.onClose(error)
    connection.opened(
      new UpstreamConnectionError(`connection to ${connection.origin.host} failed: ${error.message}`),
    )
  },
  connectError(socket, error) {
    const connection = socket.data
    connection.closed = true
    connection.opened(
      new UpstreamConnectionError(`cannot connect to ${connection.origin.host}: ${error.message}`),
    )
  },
  timeout(socket) {
    // Only idle connections have a timeout set.
    socket.terminate()
  },
}

/** What a deadline fails when it passes: the opening connection, then the exchange. */
interface DeadlineTarget {
  timedOut(error: Error): void
}

/**
 * A call's deadline: one timer from the request's start, taken by the connection while it opens
 * and then by the exchange, instead of an AbortController and a composite signal per call (the
 * profile had those at about 3 % of the gateway's CPU at 32 clients).
 */
class Deadline {
  private timer: Timer | null
  private target: DeadlineTarget | null = null
  private readonly at: number

  constructor(
    ms: number,
    /** Over at the first body bytes of a 2xx answer (a stream), not only at the answer's end. */
    readonly untilBody: boolean,
  ) {
    this.at = performance.now() + ms
    // The deadline itself as the timer's argument: no closure per call.
    this.timer = setTimeout(expire, ms, this)
  }

  aim(target: DeadlineTarget): void {
    this.target = target
  }

  expire(): void {
    this.timer = null
    const target = this.target
    this.target = null
    target?.timedOut(new DOMException('the supplier did not answer in time', 'TimeoutError'))
  }

  /** Over: the timer is cleared, nothing is failed any more. */
  end(): void {
    this.target = null
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
  }

  /** The same deadline for a second try (a stale idle connection); false once it has passed. */
  restart(): boolean {
    this.end()
    const left = this.at - performance.now()
    if (left <= 0) return false
    this.timer = setTimeout(expire, left, this)
    return true
  }
}

function expire(deadline: Deadline): void {
  deadline.expire()
}

/** One request and its answer on a connection; the answer object the caller holds. */
class Exchange implements UpstreamResponse, DeadlineTarget {
  status = 0
  private headers: Map<string, string> | null = null
  private readonly parser: ResponseParser
  private readonly chunks: Uint8Array[] = []
  private queued = 0
  private paused = false
  private ended = false
  private failure: Error | null = null
  private receivedAny = false
  private keepAlive = true
  private waiting: { resolve: (bytes: Uint8Array | null) => void; reject: (error: Error) => void } | null =
    null
  private headWaiter: { resolve: (response: Exchange) => void; reject: (error: Error) => void } | null = null
  private readonly onAbort: (() => void) | null = null
  /** The deadline ends with the first body bytes (a stream's 2xx answer). */
  private deadlineAtBody = false

  constructor(
    private readonly connection: Connection,
    private readonly signal: AbortSignal | undefined,
    private readonly deadline: Deadline | undefined,
  ) {
    this.parser = new ResponseParser({
      head: (head) => this.onHead(head),
      body: (bytes) => this.onBody(bytes),
      end: () => this.onEnd(),
    })
    if (signal) {
      this.onAbort = () => this.fail(signal.reason as Error, true)
      signal.addEventListener('abort', this.onAbort, { once: true })
    }
    deadline?.aim(this)
  }

  timedOut(error: Error): void {
    this.fail(error, true)
  }

  /** The pending read, handed over once: whoever takes it answers it. */
  private takeWaiting() {
    const waiting = this.waiting
    this.waiting = null
    return waiting
  }

  head(): Promise<Exchange> {
    return new Promise((resolve, reject) => {
      this.headWaiter = { resolve, reject }
    })
  }

  /** Whether the connection closed before any byte of the answer (a stale idle connection). */
  get untouched(): boolean {
    return !this.receivedAny
  }

  header(name: string): string | null {
    return this.headers?.get(name.toLowerCase()) ?? null
  }

  read(): Promise<Uint8Array | null> {
    const next = this.chunks.shift()
    if (next) {
      this.queued -= next.length
      if (this.paused && this.queued < PAUSE_AT_BYTES) {
        this.paused = false
        this.connection.socket?.resume()
      }
      return Promise.resolve(next)
    }
    if (this.failure) return Promise.reject(this.failure)
    if (this.ended) return Promise.resolve(null)
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject }
    })
  }

  async text(): Promise<string> {
    const parts: Uint8Array[] = []
    for (let part = await this.read(); part; part = await this.read()) parts.push(part)
    return utf8.decode(parts.length === 1 ? parts[0]! : Buffer.concat(parts))
  }

  async json(): Promise<unknown> {
    return JSON.parse(await this.text())
  }

  cancel(): void {
    if (this.ended && !this.failure) return
    this.ended = true
    this.chunks.length = 0
    this.detach()
    this.connection.close()
    this.takeWaiting()?.resolve(null)
  }

  onData(bytes: Uint8Array): void {
    this.receivedAny = true
    try {
      this.parser.feed(bytes)
    } catch (error) {
      this.fail(
        new UpstreamConnectionError(
          `bad answer from ${this.connection.origin.host}: ${(error as Error).message}`,
        ),
        true,
      )
    }
  }

  onClose(error: Error | null): void {
    if (this.parser.endsAtClose) {
      this.onEnd()
      return
    }
    if (this.ended) return
    const reason = error ?? new Error(`connection to ${this.connection.origin.host} closed`)
    this.fail(new UpstreamConnectionError(reason.message), false)
  }

  private onHead(head: ResponseHead): void {
    this.status = head.status
    this.headers = head.headers
    this.keepAlive = head.keepAlive
    const encoding = head.headers.get('content-encoding')
    if (encoding && encoding.toLowerCase() !== 'identity') {
      this.fail(new UpstreamConnectionError(`unasked content-encoding: ${encoding}`), true)
      return
    }
    // An error's body is read to its end under the deadline: it is short, and a stalled one must end.
    this.deadlineAtBody = this.deadline?.untilBody === true && head.status >= 200 && head.status < 300
    const waiter = this.headWaiter
    this.headWaiter = null
    waiter?.resolve(this)
  }

  private onBody(bytes: Uint8Array): void {
    if (this.ended) return
    if (this.deadlineAtBody) {
      this.deadlineAtBody = false
      this.deadline!.end()
    }
    const waiting = this.takeWaiting()
    if (waiting) {
      waiting.resolve(bytes)
      return
    }
    this.chunks.push(bytes)
    this.queued += bytes.length
    if (!this.paused && this.queued >= PAUSE_AT_BYTES) {
      this.paused = true
      this.connection.socket?.pause()
    }
  }

  private onEnd(): void {
    if (this.ended) return
    this.ended = true
    this.detach()
    // What is still unread is held here: the socket reads again before another request uses it.
    if (this.paused) {
      this.paused = false
      this.connection.socket?.resume()
    }
    if (this.keepAlive && this.parser.done) this.connection.release()
    else this.connection.close()
    this.takeWaiting()?.resolve(null)
  }

  /** Ends the exchange with an error: a pending head or read rejects with it. */
  private fail(error: Error, closeConnection: boolean): void {
    if (this.ended) return
    this.ended = true
    this.failure = error
    this.chunks.length = 0
    this.detach()
    if (closeConnection) this.connection.close()
    const headWaiter = this.headWaiter
    this.headWaiter = null
    headWaiter?.reject(error)
    this.takeWaiting()?.reject(error)
  }

  private detach(): void {
    if (this.onAbort) this.signal!.removeEventListener('abort', this.onAbort)
    this.deadline?.end()
  }
}

function requestText(origin: Origin, target: string, init: UpstreamRequest): string {
  let head = `${init.method} ${target} HTTP/1.1\r\nhost: ${origin.host}\r\n`
  let encoding = false
  for (const name in init.headers) {
    const value = init.headers[name]!
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value)) throw new TypeError(`header ${name} holds a line break`)
    if (name.toLowerCase() === 'accept-encoding') encoding = true
    head += `${name}: ${value}\r\n`
  }
  // Answers are read as they are: no compression is asked for.
  if (!encoding) head += 'accept-encoding: identity\r\n'
  if (init.body === undefined) return `${head}\r\n`
  return `${head}content-length: ${Buffer.byteLength(init.body)}\r\n\r\n${init.body}`
}

function idleConnection(origin: Origin): Connection | undefined {
  const list = idle.get(origin.key)
  while (list && list.length > 0) {
    const candidate = list.pop()!
    if (!candidate.closed) return candidate
  }
  return undefined
}

function exchangeOn(
  connection: Connection,
  request: string,
  init: UpstreamRequest,
  deadline: Deadline | undefined,
) {
  const exchange = new Exchange(connection, init.signal, deadline)
  connection.exchange = exchange
  const head = exchange.head()
  // Awaited by the caller; a failure before that must not count as unhandled.
  head.catch(() => {})
  connection.send(request)
  return { exchange, head }
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

/** A URL's origin and request target, parsed once per distinct URL (suppliers use a handful). */
const targets = new Map<string, { origin: Origin; target: string }>()
const MAX_TARGETS = 1024

function targetOf(url: string): { origin: Origin; target: string } {
  let found = targets.get(url)
  if (!found) {
    const parsed = new URL(url)
    found = { origin: originOf(parsed), target: `${parsed.pathname}${parsed.search}` }
    if (targets.size >= MAX_TARGETS) targets.clear()
    targets.set(url, found)
  }
  return found
}

/** Sends one request; resolves once the answer's head is in. */
export async function upstreamRequest(url: string, init: UpstreamRequest): Promise<UpstreamResponse> {
  const signal = init.signal
  if (signal?.aborted) throw signal.reason
  const { origin, target } = targetOf(url)
  const request = requestText(origin, target, init)
  const deadline = init.deadline && new Deadline(init.deadline.ms, init.deadline.until === 'body')
  const reused = idleConnection(origin)
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

/**
 * A new connection; an abort or the deadline while it opens answers the caller at once (no
 * exchange is listening yet), and the connection, once open, is closed unused.
 */
function openInTime(
  origin: Origin,
  signal: AbortSignal | undefined,
  deadline: Deadline | undefined,
): Promise<Connection> {
  const connection = new Connection(origin)
  const opening = connection.open()
  if (!signal && !deadline) return opening
  return new Promise((resolve, reject) => {
    let failure: Error | null = null
    // Given up: the caller hears at once, and the connection is closed (a TLS handshake that
    // never ends would otherwise hold its socket).
    const give = (error: Error) => {
      failure ??= error
      connection.close()
      reject(error)
    }
    const onAbort = () => give(signal!.reason as Error)
    signal?.addEventListener('abort', onAbort, { once: true })
    deadline?.aim({ timedOut: give })
    const settle = () => signal?.removeEventListener('abort', onAbort)
    opening.then(
      () => {
        settle()
        if (signal?.aborted) failure ??= signal.reason as Error
        if (!failure) return resolve(connection)
        connection.close()
        reject(failure)
      },
      (error) => {
        settle()
        reject(error)
      },
    )
  })
}

/** Closes every idle connection (tests, shutdown). */
export function closeIdleUpstreams(): void {
  for (const list of idle.values()) for (const connection of list.splice(0)) connection.close()
}
