// The HTTP/1.1 response parser on its own: bytes in, head/body/end out, however the bytes are split.
import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { MalformedResponse, type ResponseHead, ResponseParser } from '../../src/upstream/response-parser.ts'

interface Parsed {
  parser: ResponseParser
  heads: ResponseHead[]
  /** Copies of every body piece, in order. */
  pieces: Uint8Array[]
  ends: number
  /** The number of body pieces seen when end() came, or null if it did not. */
  piecesAtEnd: number | null
}

function parserWithLog(): Parsed {
  const log: Parsed = {
    parser: null as unknown as ResponseParser,
    heads: [],
    pieces: [],
    ends: 0,
    piecesAtEnd: null,
  }
  log.parser = new ResponseParser({
    head: (head) => log.heads.push(head),
    // The view is only valid during the call: keep a copy.
    body: (bytes) => log.pieces.push(bytes.slice()),
    end: () => {
      log.ends++
      log.piecesAtEnd = log.pieces.length
    },
  })
  return log
}

const bytesOf = (text: string) => new Uint8Array(Buffer.from(text, 'latin1'))
const bodyOf = (log: Parsed) => Buffer.concat(log.pieces)
const bodyText = (log: Parsed) => bodyOf(log).toString('latin1')

/** Feeds each piece in turn. */
function parse(...pieces: (string | Uint8Array)[]): Parsed {
  const log = parserWithLog()
  for (const piece of pieces) log.parser.feed(typeof piece === 'string' ? bytesOf(piece) : piece)
  return log
}

/** 'malformed' or 'accepted': what feeding these pieces comes to (short, for a readable failure). */
function outcome(...pieces: string[]): string {
  try {
    parse(...pieces)
    return 'accepted'
  } catch (error) {
    return error instanceof MalformedResponse ? 'malformed' : String(error)
  }
}

/** Feeds the text one byte at a time. */
function parseBytewise(text: string): Parsed {
  const log = parserWithLog()
  const bytes = bytesOf(text)
  for (let i = 0; i < bytes.length; i++) log.parser.feed(bytes.subarray(i, i + 1))
  return log
}

describe('Content-Length bodies', () => {
  test('head, body and end, whole in one piece', () => {
    const log = parse(
      'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"a":"bcd"}',
    )
    expect(log.heads).toHaveLength(1)
    const head = log.heads[0]!
    expect(head.status).toBe(200)
    expect(head.headers.get('content-type')).toBe('application/json')
    expect(head.headers.get('content-length')).toBe('11')
    expect(head.keepAlive).toBe(true)
    expect(bodyText(log)).toBe('{"a":"bcd"}')
    expect(log.ends).toBe(1)
    expect(log.parser.done).toBe(true)
    expect(log.parser.endsAtClose).toBe(false)
  })

  test('not done before the last byte of the body', () => {
    const log = parse('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n01234', '5678')
    expect(log.heads).toHaveLength(1)
    expect(bodyText(log)).toBe('012345678')
    expect(log.ends).toBe(0)
    expect(log.parser.done).toBe(false)
    expect(log.parser.endsAtClose).toBe(false)
    log.parser.feed(bytesOf('9'))
    expect(bodyText(log)).toBe('0123456789')
    expect(log.ends).toBe(1)
    expect(log.parser.done).toBe(true)
  })

  test('content-length: 0 ends at the head, with no body piece', () => {
    const log = parse('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n')
    expect(log.heads).toHaveLength(1)
    expect(log.pieces).toHaveLength(0)
    expect(log.ends).toBe(1)
    expect(log.parser.done).toBe(true)
  })

  test('bytes past the declared length are not taken as body', () => {
    const log = parse('HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabcEXTRA')
    expect(bodyText(log)).toBe('abc')
    expect(log.ends).toBe(1)
    expect(log.piecesAtEnd).toBe(log.pieces.length)
  })

  test('a body with every byte value comes out unchanged', () => {
    const body = new Uint8Array(512)
    for (let i = 0; i < body.length; i++) body[i] = i % 256
    const log = parse(bytesOf(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n`), body)
    expect(bodyOf(log).equals(Buffer.from(body))).toBe(true)
    expect(log.ends).toBe(1)
  })

  test('the status line without a reason phrase', () => {
    const log = parse('HTTP/1.1 404\r\ncontent-length: 2\r\n\r\nno')
    expect(log.heads[0]!.status).toBe(404)
    expect(bodyText(log)).toBe('no')
  })

  test('a bad content-length is malformed', () => {
    for (const value of ['abc', '-1', '1.5', '5, 5', '']) {
      expect(() => parse(`HTTP/1.1 200 OK\r\ncontent-length: ${value}\r\n\r\n`)).toThrow(MalformedResponse)
    }
  })
})

describe('chunked bodies', () => {
  test('chunks joined, ended by the zero chunk and the empty line', () => {
    const log = parse(
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\n\r\n',
    )
    expect(log.heads).toHaveLength(1)
    expect(log.heads[0]!.keepAlive).toBe(true)
    expect(bodyText(log)).toBe('hello 0123456789')
    expect(log.ends).toBe(1)
    expect(log.parser.done).toBe(true)
    expect(log.parser.endsAtClose).toBe(false)
  })

  test('hex sizes in either case', () => {
    const a = 'x'.repeat(0x1a)
    const b = 'y'.repeat(0x2f)
    const log = parse(
      `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1a\r\n${a}\r\n2F\r\n${b}\r\n0\r\n\r\n`,
    )
    expect(bodyText(log)).toBe(a + b)
    expect(log.ends).toBe(1)
  })

  test('chunk extensions are ignored', () => {
    const log = parse(
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n' +
        '5;name=value\r\nhello\r\n6 ; a="b;c"\r\n world\r\n0;last\r\n\r\n',
    )
    expect(bodyText(log)).toBe('hello world')
    expect(log.ends).toBe(1)
  })

  test("the framing's bytes are counted: size lines with their extensions, the CRLF after each chunk, trailers", () => {
    const framing = [
      '5;name=value\r\n',
      '\r\n',
      '6 ; a="b;c"\r\n',
      '\r\n',
      '0;last\r\n',
      'x-t: 1\r\n',
      '\r\n',
    ]
    const text = `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${framing[0]}hello${framing[1]}${framing[2]} world${framing.slice(3).join('')}`
    const bytes = framing.join('').length
    for (const log of [parse(text), parseBytewise(text)]) {
      expect(bodyText(log)).toBe('hello world')
      expect(log.parser.framingBytes).toBe(bytes)
    }
    expect(parse('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello').parser.framingBytes).toBe(0)
  })

  test('trailers are read and the message ends after them', () => {
    const log = parse(
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nx-checksum: 123\r\nx-other: 4\r\n\r\n',
    )
    expect(bodyText(log)).toBe('abc')
    expect(log.ends).toBe(1)
    expect(log.parser.done).toBe(true)
  })

  test('not done until the empty line after the last chunk', () => {
    const log = parse('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n')
    expect(bodyText(log)).toBe('abc')
    expect(log.ends).toBe(0)
    expect(log.parser.done).toBe(false)
    log.parser.feed(bytesOf('x-trailer: 1\r\n'))
    expect(log.ends).toBe(0)
    log.parser.feed(bytesOf('\r\n'))
    expect(log.ends).toBe(1)
    expect(log.parser.done).toBe(true)
  })

  test('transfer-encoding with chunked last', () => {
    const log = parse('HTTP/1.1 200 OK\r\ntransfer-encoding: identity, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n')
    expect(bodyText(log)).toBe('ok')
    expect(log.ends).toBe(1)
  })

  test('chunked wins over content-length', () => {
    const log = parse(
      'HTTP/1.1 200 OK\r\ncontent-length: 100\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n',
    )
    expect(bodyText(log)).toBe('ok')
    expect(log.ends).toBe(1)
  })

  test('a transfer-encoding other than chunked is malformed', () => {
    expect(() => parse('HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n')).toThrow(MalformedResponse)
    expect(() => parse('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\n')).toThrow(
      MalformedResponse,
    )
  })

  test('a bad chunk size is malformed', () => {
    const head = 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n'
    for (const line of ['zz', '', '-5', '0x5', '1234567890abc', ';ext']) {
      expect(() => parse(`${head}${line}\r\nhello\r\n0\r\n\r\n`)).toThrow(MalformedResponse)
    }
  })

  test('a chunk not followed by CRLF is malformed', () => {
    const head = 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n'
    // The data runs longer than its size says.
    expect(() => parse(`${head}3\r\nabcd\r\n0\r\n\r\n`)).toThrow(MalformedResponse)
    expect(() => parse(`${head}3\r\nabc\n0\r\n\r\n`)).toThrow(MalformedResponse)
    // Also when the bytes after the chunk come one at a time.
    const log = parse(`${head}3\r\nabc`)
    log.parser.feed(bytesOf('x'))
    expect(() => log.parser.feed(bytesOf('y'))).toThrow(MalformedResponse)
  })

  test('a chunk-size line that never ends is malformed once past its limit', () => {
    const log = parse('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n')
    expect(() => {
      for (let i = 0; i < 100; i++) log.parser.feed(bytesOf(`5;${'e'.repeat(100)}`))
    }).toThrow(MalformedResponse)
  })
})

describe('close-delimited bodies', () => {
  test('no length and not chunked: the body runs until the connection closes', () => {
    const log = parse('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nfirst ', 'second')
    expect(log.heads).toHaveLength(1)
    // The connection cannot be reused: the close is the body's end.
    expect(log.heads[0]!.keepAlive).toBe(false)
    expect(bodyText(log)).toBe('first second')
    expect(log.ends).toBe(0)
    expect(log.parser.done).toBe(false)
    expect(log.parser.endsAtClose).toBe(true)
  })

  test('endsAtClose is false before the head and for framed bodies', () => {
    expect(parse('HTTP/1.1 200 OK\r\n').parser.endsAtClose).toBe(false)
    expect(parse('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nab').parser.endsAtClose).toBe(false)
    expect(parse('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab').parser.endsAtClose).toBe(
      false,
    )
  })

  test('an HTTP/1.0 answer without a length is close-delimited too, even with keep-alive', () => {
    const log = parse('HTTP/1.0 200 OK\r\nconnection: keep-alive\r\n\r\nbody')
    expect(log.heads[0]!.keepAlive).toBe(false)
    expect(log.parser.endsAtClose).toBe(true)
    expect(bodyText(log)).toBe('body')
  })
})

describe('answers without a body', () => {
  for (const status of [204, 304]) {
    test(`${status} ends at the head, whatever its framing headers say`, () => {
      for (const framing of ['content-length: 10', 'transfer-encoding: chunked']) {
        const log = parse(`HTTP/1.1 ${status} X\r\n${framing}\r\n\r\n`)
        expect(log.heads).toHaveLength(1)
        expect(log.heads[0]!.status).toBe(status)
        expect(log.heads[0]!.keepAlive).toBe(true)
        expect(log.pieces).toHaveLength(0)
        expect(log.ends).toBe(1)
        expect(log.parser.done).toBe(true)
        expect(log.parser.endsAtClose).toBe(false)
      }
    })

    test(`${status} with no framing headers at all is not close-delimited`, () => {
      const log = parse(`HTTP/1.1 ${status} X\r\nx: y\r\n\r\n`)
      expect(log.heads[0]!.keepAlive).toBe(true)
      expect(log.ends).toBe(1)
      expect(log.parser.endsAtClose).toBe(false)
    })
  }
})

describe('interim 1xx answers', () => {
  test('skipped: only the final head is reported', () => {
    const log = parse(
      'HTTP/1.1 100 Continue\r\n\r\n' +
        'HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n' +
        'HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok',
    )
    expect(log.heads).toHaveLength(1)
    expect(log.heads[0]!.status).toBe(201)
    // The interim answer's headers are not merged into the final one.
    expect(log.heads[0]!.headers.has('link')).toBe(false)
    expect(bodyText(log)).toBe('ok')
    expect(log.ends).toBe(1)
  })

  test('skipped when the final head comes in a later piece', () => {
    const log = parse('HTTP/1.1 100 Continue\r\n\r\n')
    expect(log.heads).toHaveLength(0)
    expect(log.parser.done).toBe(false)
    log.parser.feed(bytesOf('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx'))
    expect(log.heads.map((head) => head.status)).toEqual([200])
    expect(bodyText(log)).toBe('x')
    expect(log.ends).toBe(1)
  })
})

describe('headers', () => {
  test('names lower-cased, values trimmed, repeated headers joined with ", "', () => {
    const log = parse(
      'HTTP/1.1 200 OK\r\nX-Thing:  one \r\nSet-Cookie: a=1\r\nx-thing: two\r\nSET-COOKIE: b=2\r\n' +
        'x-empty:\r\nx-colon: a:b:c\r\ncontent-length: 0\r\n\r\n',
    )
    const headers = log.heads[0]!.headers
    expect(headers.get('x-thing')).toBe('one, two')
    expect(headers.get('set-cookie')).toBe('a=1, b=2')
    expect(headers.get('x-empty')).toBe('')
    expect(headers.get('x-colon')).toBe('a:b:c')
    expect([...headers.keys()].sort()).toEqual([
      'content-length',
      'set-cookie',
      'x-colon',
      'x-empty',
      'x-thing',
    ])
  })

  test('a header line without a name or a colon is malformed', () => {
    expect(() => parse('HTTP/1.1 200 OK\r\nno colon here\r\n\r\n')).toThrow(MalformedResponse)
    expect(() => parse('HTTP/1.1 200 OK\r\n: value\r\n\r\n')).toThrow(MalformedResponse)
  })
})

describe('keep-alive', () => {
  const cases: [string, string, boolean][] = [
    ['HTTP/1.1', '', true],
    ['HTTP/1.1', 'connection: keep-alive\r\n', true],
    ['HTTP/1.1', 'connection: close\r\n', false],
    ['HTTP/1.1', 'Connection: Close\r\n', false],
    ['HTTP/1.1', 'connection: upgrade, close\r\n', false],
    ['HTTP/1.0', '', false],
    ['HTTP/1.0', 'connection: keep-alive\r\n', true],
    ['HTTP/1.0', 'Connection: Keep-Alive\r\n', true],
    ['HTTP/1.0', 'connection: close\r\n', false],
  ]
  for (const [version, header, keepAlive] of cases) {
    test(`${version} ${JSON.stringify(header.trim() || '(no connection header)')}: keepAlive ${keepAlive}`, () => {
      const log = parse(`${version} 200 OK\r\n${header}content-length: 2\r\n\r\nok`)
      expect(log.heads[0]!.keepAlive).toBe(keepAlive)
      expect(log.ends).toBe(1)
    })
  }
})

describe('malformed heads', () => {
  test('a bad status line', () => {
    for (const line of [
      'HTTP/2 200 OK',
      'HTTP/1.2 200 OK',
      'HTTP/1.1 20 OK',
      'HTTP/1.1 2000 OK',
      'HTTP/1.1  200 OK',
      'http/1.1 200 OK',
      'ICY 200 OK',
      'garbage',
      '',
    ]) {
      expect(() => parse(`${line}\r\ncontent-length: 0\r\n\r\n`)).toThrow(MalformedResponse)
    }
  })

  test('a head that never ends is malformed once past 64 KiB, fed in pieces', () => {
    const log = parse('HTTP/1.1 200 OK\r\n')
    const line = bytesOf(`x-filler: ${'f'.repeat(1000)}\r\n`)
    expect(() => {
      for (let i = 0; i < 100; i++) log.parser.feed(line)
    }).toThrow(MalformedResponse)
    expect(log.heads).toHaveLength(0)
  })

  test('a head that never ends is malformed once past 64 KiB, fed whole', () => {
    const text = `HTTP/1.1 200 OK\r\nx-filler: ${'f'.repeat(70 * 1024)}`
    expect(() => parse(text)).toThrow(MalformedResponse)
  })

  test('a complete head over 64 KiB is malformed however it is split', () => {
    // The limit must not depend on how the socket happened to cut the bytes.
    const text = `HTTP/1.1 200 OK\r\nx-filler: ${'f'.repeat(70 * 1024)}\r\ncontent-length: 0\r\n\r\n`
    expect(outcome(text.slice(0, 1000), text.slice(1000))).toBe('malformed')
    expect(outcome(text)).toBe('malformed')
  })

  test('a head just under the limit is accepted', () => {
    const text = `HTTP/1.1 200 OK\r\nx-filler: ${'f'.repeat(60 * 1024)}\r\ncontent-length: 1\r\n\r\nz`
    const log = parse(text.slice(0, 100), text.slice(100, 30000), text.slice(30000))
    expect(log.heads[0]!.headers.get('x-filler')).toHaveLength(60 * 1024)
    expect(bodyText(log)).toBe('z')
  })
})

describe('split invariance (examples)', () => {
  test('a response fed one byte at a time parses as it does whole', () => {
    const text =
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nx-a: 1\r\nx-a: 2\r\ntransfer-encoding: chunked\r\n\r\n' +
      '4;ext=1\r\nwiki\r\n5\r\npedia\r\n0\r\nx-t: 1\r\n\r\n'
    const whole = parse(text)
    const bytewise = parseBytewise(text)
    expect(bytewise.heads).toHaveLength(1)
    expect(bytewise.heads[0]!.status).toBe(200)
    expect(bytewise.heads[0]!.headers).toEqual(whole.heads[0]!.headers)
    expect(bodyText(bytewise)).toBe('wikipedia')
    expect(bodyText(whole)).toBe('wikipedia')
    expect(bytewise.ends).toBe(1)
    expect(bytewise.parser.done).toBe(true)
  })
})

describe('a trickled answer', () => {
  // A head near its limit, chunk-size lines near theirs and long trailers: the most a supplier
  // can make the parser hold, sent a byte at a time.
  const longest =
    `HTTP/1.1 200 OK\r\nx-filler: ${'f'.repeat(60 * 1024)}\r\ntransfer-encoding: chunked\r\n\r\n` +
    `5;${'e'.repeat(4000)}\r\nhello\r\n6;${'e'.repeat(4000)}\r\n world\r\n0;${'e'.repeat(4000)}\r\n` +
    `x-t: ${'t'.repeat(30_000)}\r\nx-u: ${'u'.repeat(30_000)}\r\n\r\n`

  test('fed one byte at a time, it parses as it does whole', () => {
    const whole = parse(longest)
    const bytewise = parseBytewise(longest)
    for (const log of [whole, bytewise]) {
      expect(log.heads).toHaveLength(1)
      expect(log.heads[0]!.headers.get('x-filler')).toHaveLength(60 * 1024)
      expect(bodyText(log)).toBe('hello world')
      expect(log.ends).toBe(1)
      expect(log.parser.done).toBe(true)
    }
    expect(bytewise.heads[0]!.headers).toEqual(whole.heads[0]!.headers)
  })

  // Per byte received: copied once to be held and under twice more as the held bytes outgrow
  // their buffer; searched once, and again up to 3 times as the first bytes of an end that may
  // run across two pieces. Re-scanning held bytes from their start would cost thousands.
  const PER_BYTE = 8

  test('the work is in proportion to the bytes, however finely they are cut', () => {
    const bytes = bytesOf(longest)
    const over: { step: number; perByte: number }[] = []
    for (const step of [1, 2, 3, 5, 64, 1000]) {
      const log = parserWithLog()
      for (let at = 0; at < bytes.length; at += step) log.parser.feed(bytes.subarray(at, at + step))
      expect(log.parser.done).toBe(true)
      const perByte = log.parser.scanned / bytes.length
      if (!(perByte <= PER_BYTE)) over.push({ step, perByte })
    }
    expect(over).toEqual([])
  })

  test('a head that never ends costs work in proportion to its bytes until refused', () => {
    const log = parse('HTTP/1.1 200 OK\r\n')
    const byte = bytesOf('f')
    let fed = 0
    expect(() => {
      for (; fed < 70 * 1024; fed++) log.parser.feed(byte)
    }).toThrow(MalformedResponse)
    expect(fed).toBeLessThan(64 * 1024)
    expect(log.parser.scanned).toBeLessThan(PER_BYTE * 64 * 1024)
  })

  test('body pieces stay as they were while later pieces arrive', () => {
    // A consumer may keep the views it is handed: bytes held for a line must not be written over them.
    const text = `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${'3\r\nabc\r\n'.repeat(50)}0\r\n\r\n`
    const bytes = bytesOf(text)
    for (const step of [2, 5, 7, 11]) {
      const views: Uint8Array[] = []
      const parser = new ResponseParser({ head: () => {}, body: (view) => views.push(view), end: () => {} })
      for (let at = 0; at < bytes.length; at += step) parser.feed(bytes.subarray(at, at + step))
      expect(Buffer.concat(views).toString('latin1')).toBe('abc'.repeat(50))
    }
  })

  test('trailers are bounded together, as a head is', () => {
    const head = 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n'
    // Each line well under the limit; together past it.
    const line = `x-t: ${'t'.repeat(1000)}\r\n`
    expect(outcome(head, line.repeat(60), '\r\n')).toBe('accepted')
    expect(outcome(head, line.repeat(70), '\r\n')).toBe('malformed')
    const log = parse(head)
    expect(() => {
      for (let i = 0; i < 70; i++) log.parser.feed(bytesOf(line))
    }).toThrow(MalformedResponse)
  })
})

// ---- property: any split of a valid response parses as the whole does ----

interface Spec {
  status: number
  headers: [string, string][]
  chunks: Uint8Array[]
  framing: 'chunked' | 'length'
  extensions: boolean
  trailers: [string, string][]
}

const token = fc.stringMatching(/^[a-z][a-z0-9-]{0,11}$/)
const value = fc.stringMatching(/^[!-~]([ -~]{0,20}[!-~])?$/)
const reserved = new Set(['content-length', 'transfer-encoding', 'connection', 'content-encoding'])

const spec: fc.Arbitrary<Spec> = fc.record({
  status: fc.integer({ min: 200, max: 599 }).filter((status) => status !== 204 && status !== 304),
  headers: fc.array(
    fc.tuple(
      token.filter((name) => !reserved.has(name)),
      value,
    ),
    { maxLength: 6 },
  ),
  chunks: fc.array(fc.uint8Array({ minLength: 1, maxLength: 300 }), { maxLength: 6 }),
  framing: fc.constantFrom('chunked' as const, 'length' as const),
  extensions: fc.boolean(),
  trailers: fc.array(fc.tuple(token, value), { maxLength: 3 }),
})

function encode(s: Spec): { bytes: Uint8Array; body: Uint8Array } {
  const body = Buffer.concat(s.chunks)
  let head = `HTTP/1.1 ${s.status} Whatever\r\n`
  for (const [name, v] of s.headers) head += `${name}: ${v}\r\n`
  if (s.framing === 'length') {
    head += `content-length: ${body.length}\r\n\r\n`
    return { bytes: Buffer.concat([Buffer.from(head, 'latin1'), body]), body }
  }
  head += 'transfer-encoding: chunked\r\n\r\n'
  const parts: Buffer[] = [Buffer.from(head, 'latin1')]
  for (const chunk of s.chunks) {
    const ext = s.extensions ? ';x=1' : ''
    parts.push(
      Buffer.from(`${chunk.length.toString(16)}${ext}\r\n`, 'latin1'),
      Buffer.from(chunk),
      Buffer.from('\r\n'),
    )
  }
  let tail = '0\r\n'
  for (const [name, v] of s.trailers) tail += `${name}: ${v}\r\n`
  parts.push(Buffer.from(`${tail}\r\n`, 'latin1'))
  return { bytes: Buffer.concat(parts), body }
}

/** Bytes of the head, the blank line that ends it included. */
const headLength = (bytes: Uint8Array) => Buffer.from(bytes).indexOf('\r\n\r\n') + 4

/** Cut points, sorted and unique, within (0, length). */
const cutsFor = (length: number) =>
  fc
    .array(fc.integer({ min: 1, max: Math.max(1, length - 1) }), { maxLength: 40 })
    .map((cuts) => [...new Set(cuts)].filter((c) => c < length).sort((a, b) => a - b))

function expectedHeaders(s: Spec): Map<string, string> {
  const map = new Map<string, string>()
  for (const [name, v] of s.headers) {
    const seen = map.get(name)
    map.set(name, seen === undefined ? v : `${seen}, ${v}`)
  }
  map.set(s.framing === 'length' ? 'content-length' : 'transfer-encoding', '')
  return map
}

test('property: any split of a valid chunked or content-length response gives the same head and body', () => {
  fc.assert(
    fc.property(
      spec.chain((s) => {
        const encoded = encode(s)
        return fc.tuple(fc.constant(s), fc.constant(encoded), cutsFor(encoded.bytes.length))
      }),
      ([s, { bytes, body }, cuts]) => {
        const whole = parse(bytes)
        const pieces: Uint8Array[] = []
        let from = 0
        for (const cut of [...cuts, bytes.length]) {
          pieces.push(bytes.subarray(from, cut))
          from = cut
        }
        const split = parse(...pieces)
        for (const log of [whole, split]) {
          expect(log.heads).toHaveLength(1)
          expect(log.heads[0]!.status).toBe(s.status)
          expect(log.heads[0]!.keepAlive).toBe(true)
          expect(log.ends).toBe(1)
          expect(log.piecesAtEnd).toBe(log.pieces.length)
          expect(log.parser.done).toBe(true)
          expect(bodyOf(log).equals(Buffer.from(body))).toBe(true)
          // No empty body pieces.
          expect(log.pieces.every((piece) => piece.length > 0)).toBe(true)
          // Every byte after the head is body or framing.
          expect(log.parser.framingBytes).toBe(bytes.length - headLength(bytes) - body.length)
        }
        const expected = expectedHeaders(s)
        const got = split.heads[0]!.headers
        expect([...got.keys()].sort()).toEqual([...expected.keys()].sort())
        for (const [name, v] of expected) if (v !== '') expect(got.get(name)).toBe(v)
        expect(got).toEqual(whole.heads[0]!.headers)
      },
    ),
    { numRuns: 500 },
  )
})

test('property: a valid response followed by anything stops at its end, however split', () => {
  fc.assert(
    fc.property(
      spec,
      fc.uint8Array({ minLength: 1, maxLength: 50 }),
      fc.integer({ min: 0, max: 1000 }),
      (s, extra, at) => {
        const { bytes, body } = encode(s)
        const all = Buffer.concat([bytes, extra])
        const cut = at % (all.length + 1)
        const log = parse(all.subarray(0, cut), all.subarray(cut))
        expect(log.ends).toBe(1)
        expect(bodyOf(log).equals(Buffer.from(body))).toBe(true)
        // What came after the end is not counted as framing.
        expect(log.parser.framingBytes).toBe(bytes.length - headLength(bytes) - body.length)
      },
    ),
    { numRuns: 300 },
  )
})
