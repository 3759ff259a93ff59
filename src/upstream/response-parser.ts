// An HTTP/1.1 response, parsed as its bytes arrive: the head, then the body by its framing
// (Content-Length, chunked, or until the connection closes). Pure: the client (client.ts) feeds it
// what the socket brings and acts on what it reports.

export interface ResponseHead {
  status: number
  /** Lower-cased names; a repeated header's values joined with ", ". */
  headers: Map<string, string>
  /** Whether the connection may carry another request once this body has ended. */
  keepAlive: boolean
}

export interface ParserEvents {
  head(head: ResponseHead): void
  /** A piece of the body: a view that is only valid during the call. */
  body(bytes: Uint8Array): void
  /** The body ended by its own framing (not by the connection closing). */
  end(): void
}

export class MalformedResponse extends Error {}

const CR = 13
const LF = 10
/** A head or a chunk-size line longer than this is not a supplier answer. */
const MAX_HEAD_BYTES = 64 * 1024
const MAX_LINE_BYTES = 4 * 1024

type Framing = { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' } | { kind: 'none' }

export class ResponseParser {
  private state: 'head' | 'body' | 'chunk-size' | 'chunk-data' | 'chunk-end' | 'trailers' | 'done' = 'head'
  /** Bytes of a head or a line not complete yet. */
  private partial: Uint8Array | null = null
  private framing: Framing = { kind: 'none' }
  private chunkLeft = 0
  private endReported = false
  /**
   * Bytes came past the answer's own end in the read that ended it (a body longer than its
   * Content-Length, an answer nobody asked for): its framing is not to be trusted for another.
   */
  overran = false

  constructor(private readonly events: ParserEvents) {}

  get done(): boolean {
    return this.state === 'done'
  }

  /** True while the body runs until the connection closes: the close is its end, not a break. */
  get endsAtClose(): boolean {
    return this.state === 'body' && this.framing.kind === 'close'
  }

  feed(bytes: Uint8Array): void {
    let at = 0
    if (this.partial) {
      bytes = Buffer.concat([this.partial, bytes])
      this.partial = null
    } else if (!Buffer.isBuffer(bytes)) {
      // A socket's bytes are a Buffer already; anything else is viewed as one.
      bytes = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    }
    while (at < bytes.length && this.state !== 'done') {
      switch (this.state) {
        case 'head': {
          const end = headEnd(bytes, at)
          if (end < 0) {
            this.keep(bytes, at, MAX_HEAD_BYTES)
            return
          }
          if (end - at > MAX_HEAD_BYTES) throw new MalformedResponse('response head too long')
          this.onHead(decodeLatin1(bytes, at, end))
          at = end + 4
          break
        }
        case 'body': {
          if (this.framing.kind === 'length') {
            const n = Math.min(this.framing.left, bytes.length - at)
            this.events.body(bytes.subarray(at, at + n))
            at += n
            this.framing.left -= n
            if (this.framing.left === 0) this.finish()
          } else {
            this.events.body(bytes.subarray(at))
            at = bytes.length
          }
          break
        }
        case 'chunk-size': {
          const end = lineEnd(bytes, at)
          if (end < 0) {
            this.keep(bytes, at, MAX_LINE_BYTES)
            return
          }
          if (end - at > MAX_LINE_BYTES) throw new MalformedResponse('chunk-size line too long')
          const line = decodeLatin1(bytes, at, end)
          const size = line.split(';', 1)[0]!.trim()
          if (!/^[0-9a-fA-F]{1,12}$/.test(size))
            throw new MalformedResponse(`bad chunk size: ${line.slice(0, 40)}`)
          this.chunkLeft = Number.parseInt(size, 16)
          this.state = this.chunkLeft === 0 ? 'trailers' : 'chunk-data'
          at = end + 2
          break
        }
        case 'chunk-data': {
          const n = Math.min(this.chunkLeft, bytes.length - at)
          this.events.body(bytes.subarray(at, at + n))
          at += n
          this.chunkLeft -= n
          if (this.chunkLeft === 0) this.state = 'chunk-end'
          break
        }
        case 'chunk-end': {
          if (bytes.length - at < 2) {
            this.keep(bytes, at, MAX_LINE_BYTES)
            return
          }
          if (bytes[at] !== CR || bytes[at + 1] !== LF)
            throw new MalformedResponse('chunk not followed by CRLF')
          at += 2
          this.state = 'chunk-size'
          break
        }
        case 'trailers': {
          const end = lineEnd(bytes, at)
          if (end < 0) {
            this.keep(bytes, at, MAX_HEAD_BYTES)
            return
          }
          // An empty line ends the trailers and the message; trailer fields are not used.
          const empty = end === at
          at = end + 2
          if (empty) this.finish()
          break
        }
      }
    }
    if (this.state === 'done' && !this.endReported) {
      this.endReported = true
      this.overran = at < bytes.length
      this.events.end()
    }
  }

  private keep(bytes: Uint8Array, at: number, limit: number): void {
    if (bytes.length - at > limit) throw new MalformedResponse('response head or line too long')
    this.partial = bytes.slice(at)
  }

  private onHead(text: string): void {
    let end = text.indexOf('\r\n')
    if (end < 0) end = text.length
    const match = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(text.slice(0, end))
    if (!match) throw new MalformedResponse(`bad status line: ${text.slice(0, 40)}`)
    const status = Number(match[2])
    const headers = new Map<string, string>()
    // Line by line without splitting the head first: a head is parsed on every supplier call.
    for (let at = end + 2; at < text.length; at = end + 2) {
      end = text.indexOf('\r\n', at)
      if (end < 0) end = text.length
      const colon = text.indexOf(':', at)
      if (colon <= at || colon > end) throw new MalformedResponse('bad header line')
      const name = text.slice(at, colon).trim().toLowerCase()
      const value = text.slice(colon + 1, end).trim()
      const seen = headers.get(name)
      headers.set(name, seen === undefined ? value : `${seen}, ${value}`)
    }
    // 1xx: an interim answer; the real one follows on the same connection.
    if (status >= 100 && status < 200) return
    const connection = (headers.get('connection') ?? '').toLowerCase()
    let keepAlive = match[1] === '1' ? !connection.includes('close') : connection.includes('keep-alive')
    const encoding = headers.get('transfer-encoding')
    const length = headers.get('content-length')
    if (status === 204 || status === 304) {
      this.framing = { kind: 'none' }
    } else if (encoding !== undefined) {
      if (!/(?:^|,)\s*chunked\s*$/i.test(encoding))
        throw new MalformedResponse(`unsupported transfer-encoding: ${encoding}`)
      this.framing = { kind: 'chunked' }
      // Both framings (RFC 9112 6.3): read as chunked, but the connection is not trusted again.
      if (length !== undefined) keepAlive = false
    } else if (length !== undefined) {
      if (!/^\d{1,15}$/.test(length))
        throw new MalformedResponse(`bad content-length: ${length.slice(0, 40)}`)
      this.framing = { kind: 'length', left: Number(length) }
    } else {
      this.framing = { kind: 'close' }
      keepAlive = false
    }
    this.events.head({ status, headers, keepAlive })
    if (this.framing.kind === 'none' || (this.framing.kind === 'length' && this.framing.left === 0))
      this.finish()
    else this.state = this.framing.kind === 'chunked' ? 'chunk-size' : 'body'
  }

  /** The end is reported once feed has seen what came after it in the same read. */
  private finish(): void {
    this.state = 'done'
  }
}

// Searched natively: feed makes every input a Buffer.
const HEAD_END = Buffer.from('\r\n\r\n')
const LINE_END = Buffer.from('\r\n')

function headEnd(bytes: Uint8Array, from: number): number {
  return (bytes as Buffer).indexOf(HEAD_END, from)
}

function lineEnd(bytes: Uint8Array, from: number): number {
  return (bytes as Buffer).indexOf(LINE_END, from)
}

// The bytes are a Buffer (feed makes them one): decoded in place, without taking their `.buffer`
// (that makes the engine give a socket's view a backing ArrayBuffer of its own).
function decodeLatin1(bytes: Uint8Array, from: number, to: number): string {
  return (bytes as Buffer).toString('latin1', from, to)
}
