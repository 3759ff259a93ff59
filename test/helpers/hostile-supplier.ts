// A supplier that misbehaves on purpose, on a raw TCP socket (Bun.listen): each request gets the
// head and body the test chose, and a body can be pumped for as long as the peer takes it, so a
// test counts on this side exactly how many body bytes the gateway's socket accepted before it
// closed the connection.
import type { Socket, TCPSocketListener } from 'bun'

/** What to answer one request with. */
export interface HostileAnswer {
  /** The status line and header lines, without the blank line that ends the head. */
  head: string
  /** Bytes sent as they are after the head. */
  body?: string
  /** Then this many bytes of `fillWith` over and over, written only as fast as the peer takes them. */
  fill?: number
  /**
   * A byte, or a run of them (its length a divisor of 64 KiB, and of `fill`, to repeat whole):
   * 'a' unless told.
   */
  fillWith?: string
  /** The fill (and what follows) waits for this: the body before it is all a first read can get. */
  gate?: Promise<void>
  /** After the fill, if the peer is still there. */
  tail?: string
  /** Close the connection once it is all sent (a close-delimited body ends there). */
  close?: boolean
}

export interface HostileCall {
  method: string
  path: string
  body: string
  /** Bytes of the answer (head included) the gateway's socket accepted. */
  sent: number
  /** Whether the whole answer was sent. */
  finished: boolean
  /** Whether the gateway closed the connection. */
  closed: boolean
}

export interface HostileSupplier {
  url: string
  calls: HostileCall[]
  stop(): void
}

const PIECE = 64 * 1024

interface Link {
  received: Buffer
  call: HostileCall | null
  /** What is left to send: bytes queued now, and filler still to make. */
  queued: Buffer | null
  fillLeft: number
  fill: Buffer
  tail: Buffer | null
  close: boolean
  /** The fill waits for the answer's gate. */
  gated: boolean
}

function pump(socket: Socket<Link>): void {
  const link = socket.data
  const call = link.call
  if (!call) return
  for (;;) {
    if (!link.queued) {
      if (link.gated) return
      if (link.fillLeft > 0) {
        const n = Math.min(PIECE, link.fillLeft)
        link.fillLeft -= n
        link.queued = n === link.fill.length ? link.fill : link.fill.subarray(0, n)
      } else if (link.tail) {
        link.queued = link.tail
        link.tail = null
      } else {
        call.finished = true
        link.call = null
        if (link.close) socket.end()
        return
      }
    }
    const written = socket.write(link.queued)
    if (written <= 0) return
    call.sent += written
    link.queued = written < link.queued.length ? link.queued.subarray(written) : null
    if (link.queued) return // the rest goes on `drain`
  }
}

/** Starts a hostile supplier on 127.0.0.1; `answer` decides each request's answer. */
export function hostileSupplier(answer: (call: HostileCall) => HostileAnswer): HostileSupplier {
  const calls: HostileCall[] = []
  const listener: TCPSocketListener<Link> = Bun.listen<Link>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        socket.data = {
          received: Buffer.alloc(0),
          call: null,
          queued: null,
          fillLeft: 0,
          fill: Buffer.alloc(0),
          tail: null,
          close: false,
          gated: false,
        }
      },
      data(socket, bytes) {
        const link = socket.data
        link.received = Buffer.concat([link.received, bytes])
        const end = link.received.indexOf('\r\n\r\n')
        if (end < 0) return
        const head = link.received.subarray(0, end).toString('latin1')
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0)
        if (link.received.length < end + 4 + length) return
        const [method = '', path = ''] = head.split(' ', 2)
        const body = link.received.subarray(end + 4, end + 4 + length).toString('utf8')
        link.received = link.received.subarray(end + 4 + length)
        const call: HostileCall = { method, path, body, sent: 0, finished: false, closed: false }
        calls.push(call)
        const plan = answer(call)
        link.call = call
        link.queued = Buffer.from(`${plan.head}\r\n\r\n${plan.body ?? ''}`, 'utf8')
        link.fillLeft = plan.fill ?? 0
        link.fill = Buffer.alloc(Math.min(PIECE, link.fillLeft), plan.fillWith ?? 'a')
        link.tail = plan.tail ? Buffer.from(plan.tail, 'utf8') : null
        link.close = plan.close ?? false
        link.gated = plan.gate !== undefined
        plan.gate?.then(() => {
          link.gated = false
          pump(socket)
        })
        pump(socket)
      },
      drain(socket) {
        pump(socket)
      },
      close(socket) {
        const call = socket.data.call
        if (call) call.closed = true
        socket.data.call = null
      },
      error(socket) {
        const call = socket.data.call
        if (call) call.closed = true
        socket.data.call = null
      },
    },
  })
  return {
    url: `http://127.0.0.1:${listener.port}`,
    calls,
    stop: () => listener.stop(true),
  }
}

/** An HTTP/1.1 head: the status line and the headers given. */
export function httpHead(status: number, headers: Record<string, string | number> = {}): string {
  let head = `HTTP/1.1 ${status} X`
  for (const [name, value] of Object.entries(headers)) head += `\r\n${name}: ${value}`
  return head
}

/** A whole answer with a Content-Length: the connection stays open for the next request. */
export function wholeAnswer(
  status: number,
  body: string,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): HostileAnswer {
  return { head: httpHead(status, { ...headers, 'content-length': Buffer.byteLength(body) }), body }
}

/** Server-sent events, the body ending when the connection closes. */
export function sseAnswer(frames: string[]): HostileAnswer {
  return {
    head: httpHead(200, { 'content-type': 'text/event-stream', connection: 'close' }),
    body: frames.map((f) => `${f}\n\n`).join(''),
    close: true,
  }
}
