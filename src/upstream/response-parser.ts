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
  /** Bytes of a head or a line not complete yet: the first `held` bytes of `pending`. */
  private pending: Buffer | null = null
  private held = 0
  /** Bytes of the trailer lines so far: together they are bounded as a head is. */
  private trailerBytes = 0
  private scannedBytes = 0
  private framed = 0
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

  /**
   * Bytes searched for a head's or a line's end, or copied to be held for the next piece: a
   * supplier that trickles its answer costs work in proportion to the bytes it sends.
   */
  get scanned(): number {
    return this.scannedBytes
  }

  /**
   * Bytes of a chunked body's framing so far (chunk-size lines with their extensions, the CRLF after
   * each chunk, trailers): read off the wire as the body is, though no body byte is among them.
   */
  get framingBytes(): number {
    return this.framed
  }

  /** True while the body runs until the connection closes: the close is its end, not a break. */
  get endsAtClose(): boolean {
    return this.state === 'body' && this.framing.kind === 'close'
  }

  feed(input: Uint8Array): void {
    // A socket's bytes are a Buffer already; anything else is viewed as one.
    const piece = Buffer.isBuffer(input)
      ? input
      : Buffer.from(input.buffer, input.byteOffset, input.byteLength)
    const kept = this.held
    this.held = 0
    // With bytes held, the held head or line and as much of this piece as it may still run into.
    let bytes = kept > 0 ? this.hold(kept, piece.subarray(0, MAX_HEAD_BYTES + 4)) : piece
    let at = 0
    // Held bytes were searched already: the search resumes where the last piece ended, less the
    // bytes that an end running across the two pieces starts with.
    let searched = kept
    while (at < bytes.length && this.state !== 'done') {
      switch (this.state) {
        case 'head': {
          const end = this.find(bytes, HEAD_END, Math.max(at, searched - 3))
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
          const end = this.find(bytes, LINE_END, Math.max(at, searched - 1))
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
          this.framed += end + 2 - at
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
          this.framed += 2
          at += 2
          this.state = 'chunk-size'
          break
        }
        case 'trailers': {
          const end = this.find(bytes, LINE_END, Math.max(at, searched - 1))
          if (end < 0) {
            this.keep(bytes, at, MAX_HEAD_BYTES - this.trailerBytes)
            return
          }
          // An empty line ends the trailers and the message; trailer fields are not used.
          const empty = end === at
          this.trailerBytes += end + 2 - at
          this.framed += end + 2 - at
          if (this.trailerBytes > MAX_HEAD_BYTES) throw new MalformedResponse('trailers too long')
          at = end + 2
          if (empty) this.finish()
          break
        }
      }
      if (bytes !== piece && at >= kept) {
        // The held head or line is complete: the rest is read from the piece itself, so body
        // pieces are views of the socket's bytes and `pending` is not written while they live.
        bytes = piece
        at -= kept
        searched = 0
        this.pending = null
      }
    }
    if (this.state === 'done' && !this.endReported) {
      this.endReported = true
      this.overran = at < bytes.length
      this.events.end()
    }
  }

  /** Holds `bytes` from `at` on for the next piece. */
  private keep(bytes: Buffer, at: number, limit: number): void {
    const rest = bytes.length - at
    if (rest > limit) throw new MalformedResponse('response head or line too long')
    // `pending` is set only while `bytes` is a view of it from its start (what was held is not
    // complete yet): the bytes are in place already. Otherwise they are the piece's, copied.
    if (this.pending === null) this.hold(0, bytes.subarray(at))
    this.held = rest
  }

  /**
   * `pending` with `bytes` copied in after its first `kept` bytes; grown by doubling, so a byte
   * is copied a bounded number of times however finely its answer is cut.
   */
  private hold(kept: number, bytes: Uint8Array): Buffer {
    const size = kept + bytes.length
    if (this.pending === null || this.pending.length < size) {
      const grown = Buffer.allocUnsafe(Math.max(size, 2 * (this.pending?.length ?? 0), 256))
      if (this.pending !== null) this.pending.copy(grown, 0, 0, kept)
      this.scannedBytes += kept
      this.pending = grown
    }
    this.pending.set(bytes, kept)
    this.scannedBytes += bytes.length
    return this.pending.subarray(0, size)
  }

  /** Where `end` starts in `bytes` at or after `from`, or -1; counted in `scanned`. */
  private find(bytes: Buffer, end: Buffer, from: number): number {
    const found = bytes.indexOf(end, from)
    this.scannedBytes += (found < 0 ? bytes.length : found + end.length) - from
    return found
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

// The bytes are a Buffer (feed makes them one): decoded in place, without taking their `.buffer`
// (that makes the engine give a socket's view a backing ArrayBuffer of its own).
function decodeLatin1(bytes: Uint8Array, from: number, to: number): string {
  return (bytes as Buffer).toString('latin1', from, to)
}
