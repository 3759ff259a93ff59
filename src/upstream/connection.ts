// One keep-alive socket to a supplier's origin (Bun.connect on the main thread), the exchange it
// carries, and opening one within a call's abort signal and deadline. TLS is verified against the
// system's CAs and the host name.
import type { Socket, SocketHandler } from 'bun'
import type { Deadline } from './deadline.ts'
import { UpstreamConnectionError } from './errors.ts'
import type { Exchange } from './exchange.ts'
import type { Origin } from './origin.ts'
import { forgetIdle, parkIdle } from './pool.ts'

/** One socket to an origin and the exchange it carries, if any. */
export class Connection {
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
    forgetIdle(this)
    this.exchange?.onClose(error)
  }

  /** Back to the idle list, or closed when the list is full. */
  release(): void {
    this.exchange = null
    if (this.closed) return
    if (!parkIdle(this)) this.close()
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

/**
 * A new connection; an abort or the deadline while it opens answers the caller at once (no
 * exchange is listening yet), and the connection, once open, is closed unused.
 */
export function openInTime(
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
