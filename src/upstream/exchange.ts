// One request and its answer on a connection: the request written in one go, the answer parsed as
// its bytes arrive, its body bounded and handed to the reader with backpressure on the socket.
import type { UpstreamRequest, UpstreamResponse } from './client.ts'
import type { Connection } from './connection.ts'
import type { Deadline, DeadlineTarget } from './deadline.ts'
import { UpstreamBodyTooLarge, UpstreamConnectionError } from './errors.ts'
import type { Origin } from './origin.ts'
import { type ResponseHead, ResponseParser } from './response-parser.ts'

const utf8 = new TextDecoder()

/** Past this much unread body, reading from the socket pauses until the consumer catches up. */
const PAUSE_AT_BYTES = 64 * 1024

/** One request and its answer on a connection; the answer object the caller holds. */
export class Exchange implements UpstreamResponse, DeadlineTarget {
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
  private bodyBytes = 0

  constructor(
    private readonly connection: Connection,
    private readonly signal: AbortSignal | undefined,
    private readonly deadline: Deadline | undefined,
    private readonly maxBodyBytes: number,
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
    // The caller learns the status; the body it announced is never read.
    const length = Number(head.headers.get('content-length'))
    if (length > this.maxBodyBytes) this.tooLarge()
  }

  private tooLarge(): void {
    this.fail(
      new UpstreamBodyTooLarge(
        `the answer from ${this.connection.origin.host} is longer than ${this.maxBodyBytes} bytes`,
      ),
      true,
    )
  }

  private onBody(bytes: Uint8Array): void {
    if (this.ended) return
    this.bodyBytes += bytes.length
    // A chunked body's framing is read as its bytes are: it may add as much again, no more (tiny
    // chunks, each with a long extension, would otherwise be read without bound past the cap).
    if (this.bodyBytes > this.maxBodyBytes || this.parser.framingBytes > this.maxBodyBytes) {
      this.tooLarge()
      return
    }
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
    if (this.keepAlive && this.parser.done && !this.parser.overran) this.connection.release()
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

export function requestText(origin: Origin, target: string, init: UpstreamRequest): string {
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

export function exchangeOn(
  connection: Connection,
  request: string,
  init: UpstreamRequest,
  deadline: Deadline | undefined,
) {
  const exchange = new Exchange(
    connection,
    init.signal,
    deadline,
    init.maxBodyBytes ?? Number.POSITIVE_INFINITY,
  )
  connection.exchange = exchange
  const head = exchange.head()
  // Awaited by the caller; a failure before that must not count as unhandled.
  head.catch(() => {})
  connection.send(request)
  return { exchange, head }
}
