// The supplier HTTP/1.1 client against real servers on 127.0.0.1: Bun.serve for ordinary HTTP, and
// raw TCP servers (Bun.listen) for hand-written byte streams and servers that misbehave.
import { afterAll, afterEach, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'
import type { Server, Socket, TCPSocketListener } from 'bun'
import {
  closeIdleUpstreams,
  UpstreamBodyTooLarge,
  UpstreamConnectionError,
  type UpstreamResponse,
  upstreamRequest,
} from '../../src/upstream/client.ts'
import { selfSignedCert } from '../helpers/tls.ts'

// ---- helpers ----

const stoppers: (() => void)[] = []

afterEach(() => {
  closeIdleUpstreams()
  for (const stop of stoppers.splice(0)) stop()
})
afterAll(() => closeIdleUpstreams())

/** Polls until the condition holds; fails after a bound (a hang guard, not a timing check). */
async function waitFor(what: string, condition: () => boolean, ms = 20_000): Promise<void> {
  const until = Date.now() + ms
  while (!condition()) {
    if (Date.now() > until) throw new Error(`gave up waiting for ${what}`)
    await Bun.sleep(5)
  }
}

/** The promise's outcome, or a failure if it is still pending after the bound. */
function within<T>(promise: Promise<T>, what: string, ms = 20_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still pending: ${what}`)), ms)
  })
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer))
}

/** What a promise settles to: its value, or the error it rejects with. */
async function settle<T>(
  promise: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise }
  } catch (error) {
    return { ok: false, error }
  }
}

async function rejection(promise: Promise<unknown>, what = 'the call'): Promise<unknown> {
  const outcome = await within(settle(promise), what)
  if (outcome.ok) throw new Error(`${what} resolved; it should have rejected`)
  return outcome.error
}

function answer(status: number, body: string, headers: Record<string, string> = {}): string {
  let head = `HTTP/1.1 ${status} X\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`
  return `${head}\r\n${body}`
}

interface RawRequest {
  /** The request line and headers, without the final empty line. */
  head: string
  line: string
  body: Buffer
  /** Over the whole server, from 0. */
  index: number
  /** On its connection, from 0. */
  onConnection: number
}

interface RawConnection {
  id: number
  socket: Socket<RawConnection>
  received: Buffer
  requests: RawRequest[]
  closed: boolean
  /** Bytes the kernel took from send(). */
  written: number
  unsent: Buffer | null
  send(bytes: string | Uint8Array): void
}

interface RawServer {
  url: string
  port: number
  connections: RawConnection[]
  requests: RawRequest[]
  readonly accepted: number
  readonly closed: number
}

/** A TCP server that hands each complete HTTP request (Content-Length bodies) to the handler. */
function rawServer(onRequest: (connection: RawConnection, request: RawRequest) => void): RawServer {
  const connections: RawConnection[] = []
  const requests: RawRequest[] = []
  const flush = (connection: RawConnection) => {
    while (connection.unsent) {
      const written = Math.max(0, connection.socket.write(connection.unsent))
      connection.written += written
      connection.unsent = written < connection.unsent.length ? connection.unsent.subarray(written) : null
      if (written === 0) return
    }
  }
  const listener: TCPSocketListener<RawConnection> = Bun.listen<RawConnection>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        const connection: RawConnection = {
          id: connections.length,
          socket,
          received: Buffer.alloc(0),
          requests: [],
          closed: false,
          written: 0,
          unsent: null,
          send(bytes) {
            const buffer = typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : Buffer.from(bytes)
            connection.unsent = connection.unsent ? Buffer.concat([connection.unsent, buffer]) : buffer
            flush(connection)
          },
        }
        socket.data = connection
        connections.push(connection)
      },
      data(socket, bytes) {
        const connection = socket.data
        connection.received = Buffer.concat([connection.received, bytes])
        for (;;) {
          const end = connection.received.indexOf('\r\n\r\n')
          if (end < 0) return
          const head = connection.received.subarray(0, end).toString('latin1')
          const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0)
          if (connection.received.length < end + 4 + length) return
          const body = Buffer.from(connection.received.subarray(end + 4, end + 4 + length))
          connection.received = connection.received.subarray(end + 4 + length)
          const request: RawRequest = {
            head,
            line: head.split('\r\n', 1)[0]!,
            body,
            index: requests.length,
            onConnection: connection.requests.length,
          }
          requests.push(request)
          connection.requests.push(request)
          onRequest(connection, request)
        }
      },
      drain(socket) {
        flush(socket.data)
      },
      close(socket) {
        socket.data.closed = true
      },
      error(socket) {
        socket.data.closed = true
      },
    },
  })
  stoppers.push(() => listener.stop(true))
  return {
    url: `http://127.0.0.1:${listener.port}`,
    port: listener.port,
    connections,
    requests,
    get accepted() {
      return connections.length
    },
    get closed() {
      return connections.filter((connection) => connection.closed).length
    },
  }
}

function serve(fetch: (request: Request, server: Server<undefined>) => Response | Promise<Response>) {
  const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch })
  stoppers.push(() => server.stop(true))
  return { server, url: `http://127.0.0.1:${server.port}` }
}

const get = (url: string, signal?: AbortSignal) =>
  upstreamRequest(url, { method: 'GET', headers: {}, ...(signal ? { signal } : {}) })

async function readAll(response: UpstreamResponse): Promise<Buffer> {
  const parts: Uint8Array[] = []
  for (let part = await response.read(); part; part = await response.read()) parts.push(part.slice())
  return Buffer.concat(parts)
}

// ---- tests ----

describe('a request and its answer', () => {
  test('a JSON POST round trip: method, path, headers and body as sent; status, headers, JSON', async () => {
    let seen: { method: string; url: string; headers: Record<string, string>; body: string } | null = null
    const { server, url } = serve(async (request) => {
      seen = {
        method: request.method,
        url: request.url,
        headers: Object.fromEntries(request.headers),
        body: await request.text(),
      }
      return Response.json({ echoed: JSON.parse(seen.body) }, { status: 201, headers: { 'X-Answer': '42' } })
    })
    const payload = { model: 'm-1', text: 'héllo ✓ — ünïcode', n: 3 }
    const body = JSON.stringify(payload)
    const response = await upstreamRequest(`${url}/v1/chat/completions?trace=1&x=%20y`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer k-123', 'X-Custom': 'a b' },
      body,
    })
    expect(response.status).toBe(201)
    expect(response.header('x-answer')).toBe('42')
    expect(response.header('X-ANSWER')).toBe('42')
    expect(response.header('content-type')).toContain('application/json')
    expect(response.header('x-not-there')).toBeNull()
    expect(await response.json()).toEqual({ echoed: payload })
    expect(seen).not.toBeNull()
    const got = seen!
    expect(got.method).toBe('POST')
    expect(got.url).toBe(`http://127.0.0.1:${server.port}/v1/chat/completions?trace=1&x=%20y`)
    expect(got.headers.host).toBe(`127.0.0.1:${server.port}`)
    // The length in bytes, not in characters.
    expect(got.headers['content-length']).toBe(String(Buffer.byteLength(body)))
    expect(Buffer.byteLength(body)).toBeGreaterThan(body.length)
    expect(got.headers['content-type']).toBe('application/json')
    expect(got.headers.authorization).toBe('Bearer k-123')
    expect(got.headers['x-custom']).toBe('a b')
    expect(got.headers['accept-encoding']).toBe('identity')
    expect(got.body).toBe(body)
  })

  test('the request bytes: request line, host, identity encoding; no length without a body', async () => {
    const server = rawServer((connection) => connection.send(answer(200, 'ok')))
    const response = await upstreamRequest(`${server.url}/models?a=1`, {
      method: 'GET',
      headers: { 'x-k': 'v' },
    })
    expect(await response.text()).toBe('ok')
    const [request] = server.requests
    const lines = request!.head.split('\r\n')
    expect(lines[0]).toBe('GET /models?a=1 HTTP/1.1')
    const fields = lines.slice(1).map((line) => line.toLowerCase())
    expect(fields).toContain(`host: 127.0.0.1:${server.port}`)
    expect(fields).toContain('x-k: v')
    expect(fields).toContain('accept-encoding: identity')
    expect(fields.some((line) => line.startsWith('content-length:'))).toBe(false)
    expect(fields.some((line) => line.startsWith('transfer-encoding:'))).toBe(false)
  })

  test('an accept-encoding given by the caller is sent as given, once', async () => {
    const server = rawServer((connection) => connection.send(answer(200, 'ok')))
    const response = await upstreamRequest(`${server.url}/`, {
      method: 'GET',
      headers: { 'Accept-Encoding': 'br' },
    })
    expect(await response.text()).toBe('ok')
    const encodings = server.requests[0]!.head.split('\r\n').filter((line) =>
      line.toLowerCase().startsWith('accept-encoding:'),
    )
    expect(encodings).toEqual(['Accept-Encoding: br'])
  })

  test('a header value with a line break is refused before anything is sent', async () => {
    const server = rawServer((connection) => connection.send(answer(200, 'ok')))
    const error = await rejection(
      upstreamRequest(`${server.url}/`, { method: 'GET', headers: { 'x-a': 'b\r\nx-injected: 1' } }),
    )
    expect(error).toBeInstanceOf(TypeError)
    // A call after it still works, and is the only request the server ever saw.
    expect(await (await get(`${server.url}/`)).text()).toBe('ok')
    expect(server.requests).toHaveLength(1)
    expect(server.requests[0]!.head).not.toContain('x-injected')
  })

  test('a large POST body arrives whole', async () => {
    let received: Buffer | null = null
    const { url } = serve(async (request) => {
      received = Buffer.from(await request.arrayBuffer())
      return new Response(String(received.length))
    })
    const body = Array.from({ length: 200_000 }, (_, i) => `line ${i} ✓\n`).join('')
    const response = await upstreamRequest(`${url}/upload`, { method: 'POST', headers: {}, body })
    expect(await response.text()).toBe(String(Buffer.byteLength(body)))
    expect(received!.equals(Buffer.from(body))).toBe(true)
  }, 20_000)

  test('an interim 100 answer is skipped; the final status and body are returned', async () => {
    const server = rawServer((connection) =>
      connection.send(`HTTP/1.1 100 Continue\r\n\r\n${answer(200, 'final', { 'x-final': 'yes' })}`),
    )
    const response = await get(`${server.url}/`)
    expect(response.status).toBe(200)
    expect(response.header('x-final')).toBe('yes')
    expect(await response.text()).toBe('final')
  })

  test('repeated answer headers are joined', async () => {
    const server = rawServer((connection) =>
      connection.send('HTTP/1.1 200 OK\r\nx-r: 1\r\nX-R: 2\r\ncontent-length: 0\r\n\r\n'),
    )
    const response = await get(`${server.url}/`)
    expect(response.header('x-r')).toBe('1, 2')
    expect(await response.read()).toBeNull()
  })

  test('a close-delimited body is read up to the close, and the connection is not reused', async () => {
    const server = rawServer((connection) => {
      connection.send('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil ')
      connection.send('the close')
      connection.socket.end()
    })
    expect(await (await get(`${server.url}/a`)).text()).toBe('until the close')
    expect(await (await get(`${server.url}/b`)).text()).toBe('until the close')
    expect(server.accepted).toBe(2)
  })

  test('a malformed answer rejects with UpstreamConnectionError and the connection is closed', async () => {
    const server = rawServer((connection) => connection.send('SPDY/9 200 OK\r\n\r\n'))
    const error = await rejection(get(`${server.url}/`))
    expect(error).toBeInstanceOf(UpstreamConnectionError)
    await waitFor('the server to see the close', () => server.closed === 1)
  })
})

describe('keep-alive', () => {
  test('three sequential requests share one connection', async () => {
    const server = rawServer((connection, request) =>
      connection.send(answer(200, `${request.line} #${request.onConnection}`)),
    )
    const texts: string[] = []
    for (const path of ['/a', '/b', '/c']) texts.push(await (await get(`${server.url}${path}`)).text())
    expect(texts).toEqual(['GET /a HTTP/1.1 #0', 'GET /b HTTP/1.1 #1', 'GET /c HTTP/1.1 #2'])
    expect(server.accepted).toBe(1)
    expect(server.closed).toBe(0)
  })

  test('a chunked body and a 204 leave the connection reusable', async () => {
    const server = rawServer((connection, request) => {
      if (request.line.startsWith('GET /chunked'))
        connection.send('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n')
      else if (request.line.startsWith('GET /empty')) connection.send('HTTP/1.1 204 No Content\r\n\r\n')
      else connection.send(answer(200, 'last'))
    })
    expect(await (await get(`${server.url}/chunked`)).text()).toBe('abc')
    const empty = await get(`${server.url}/empty`)
    expect(empty.status).toBe(204)
    expect(await empty.read()).toBeNull()
    expect(await (await get(`${server.url}/last`)).text()).toBe('last')
    expect(server.accepted).toBe(1)
  })

  test('concurrent requests open separate connections, then the idle ones are reused', async () => {
    // The server answers only once all three requests are in: on one shared connection they never would be.
    const held: [RawConnection, RawRequest][] = []
    const server = rawServer((connection, request) => {
      if (request.index < 3) {
        held.push([connection, request])
        if (held.length === 3) for (const [c, r] of held) c.send(answer(200, r.line))
      } else connection.send(answer(200, `again ${request.line}`))
    })
    const responses = await within(
      Promise.all(['/1', '/2', '/3'].map((path) => get(`${server.url}${path}`))),
      'three concurrent requests',
    )
    expect(await Promise.all(responses.map((response) => response.text()))).toEqual([
      'GET /1 HTTP/1.1',
      'GET /2 HTTP/1.1',
      'GET /3 HTTP/1.1',
    ])
    expect(server.accepted).toBe(3)
    for (const path of ['/4', '/5', '/6', '/7']) await (await get(`${server.url}${path}`)).text()
    expect(server.accepted).toBe(3)
    expect(server.closed).toBe(0)
  })

  test('a connection whose answer is still streaming is not given to another request', async () => {
    const server = rawServer((connection, request) => {
      if (request.index === 0)
        connection.send('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n')
      else connection.send(answer(200, 'second'))
    })
    const streaming = await get(`${server.url}/stream`)
    expect(Buffer.from((await streaming.read())!).toString()).toBe('first')
    const other = await within(get(`${server.url}/other`), 'the second request')
    expect(await other.text()).toBe('second')
    expect(server.accepted).toBe(2)
    expect(server.connections[1]!.requests.map((request) => request.line)).toEqual(['GET /other HTTP/1.1'])
    streaming.cancel()
  })

  for (const [name, head] of [
    ['connection: close', 'HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok'],
    ['HTTP/1.0', 'HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok'],
  ] as const) {
    test(`an answer with ${name} is not reused: the client closes it`, async () => {
      // The server leaves its side open: the client must not keep it.
      const server = rawServer((connection) => connection.send(head))
      expect(await (await get(`${server.url}/a`)).text()).toBe('ok')
      await waitFor('the client to close the first connection', () => server.closed === 1)
      expect(await (await get(`${server.url}/b`)).text()).toBe('ok')
      expect(server.accepted).toBe(2)
      expect(server.connections[1]!.requests.map((request) => request.line)).toEqual(['GET /b HTTP/1.1'])
    })
  }

  test('a server that closes an idle connection: the next request succeeds on a new one', async () => {
    const server = rawServer((connection, request) => {
      connection.send(answer(200, `answer ${request.index}`))
      // Closes its side once the answer is out, as a server with a short keep-alive does.
      if (request.index === 0) setTimeout(() => connection.socket.end(), 20)
    })
    expect(await (await get(`${server.url}/`)).text()).toBe('answer 0')
    await waitFor('the first connection to close', () => server.closed === 1)
    expect(await (await get(`${server.url}/`)).text()).toBe('answer 1')
    expect(server.accepted).toBe(2)
  })

  test('a reused connection closed on the request, before any answer byte: retried once on a new one', async () => {
    // The server drops the kept-alive connection as the second request arrives on it, without a byte.
    const server = rawServer((connection, request) => {
      if (connection.id === 0 && request.onConnection === 1) connection.socket.end()
      else connection.send(answer(200, `${request.line} on ${connection.id}`))
    })
    expect(await (await get(`${server.url}/first`)).text()).toBe('GET /first HTTP/1.1 on 0')
    const response = await within(
      upstreamRequest(`${server.url}/second`, { method: 'POST', headers: {}, body: 'payload' }),
      'the retried request',
    )
    expect(await response.text()).toBe('POST /second HTTP/1.1 on 1')
    expect(server.accepted).toBe(2)
    // The same request, body included, went out again on the new connection.
    expect(server.connections[0]!.requests[1]!.body.toString()).toBe('payload')
    expect(server.connections[1]!.requests[0]!.body.toString()).toBe('payload')
  })

  test('the retry happens once: a second close before the answer rejects', async () => {
    const server = rawServer((connection, request) => {
      if (request.index === 0) connection.send(answer(200, 'first'))
      else connection.socket.end()
    })
    expect(await (await get(`${server.url}/`)).text()).toBe('first')
    const error = await rejection(get(`${server.url}/`))
    expect(error).toBeInstanceOf(UpstreamConnectionError)
    expect(server.accepted).toBe(2)
    // The first call, the request on the reused connection, and its one retry.
    expect(server.requests).toHaveLength(3)
  })

  test('no retry once a byte of the answer came on the reused connection', async () => {
    const server = rawServer((connection, request) => {
      if (request.index === 0) connection.send(answer(200, 'first'))
      else {
        connection.send('HTTP/1.1 200 OK\r\ncontent-le')
        connection.socket.end()
      }
    })
    expect(await (await get(`${server.url}/`)).text()).toBe('first')
    const error = await rejection(get(`${server.url}/`))
    expect(error).toBeInstanceOf(UpstreamConnectionError)
    expect(server.accepted).toBe(1)
    expect(server.requests).toHaveLength(2)
  })

  test('no retry when a new connection closes before the answer', async () => {
    const server = rawServer((connection) => connection.socket.end())
    const error = await rejection(get(`${server.url}/`))
    expect(error).toBeInstanceOf(UpstreamConnectionError)
    expect(server.accepted).toBe(1)
    expect(server.requests).toHaveLength(1)
  })

  test('bytes arriving on an idle connection: it is dropped, not reused', async () => {
    const server = rawServer((connection, request) => connection.send(answer(200, `answer ${request.index}`)))
    expect(await (await get(`${server.url}/`)).text()).toBe('answer 0')
    server.connections[0]!.send(answer(200, 'stray: asked by nobody'))
    await waitFor('the client to drop the connection', () => server.closed === 1)
    expect(await (await get(`${server.url}/`)).text()).toBe('answer 1')
    expect(server.accepted).toBe(2)
  })

  test('at most 128 idle connections per origin are kept; closeIdleUpstreams closes them', async () => {
    const count = 130
    const held: [RawConnection, RawRequest][] = []
    const server = rawServer((connection, request) => {
      held.push([connection, request])
      if (held.length === count) for (const [c, r] of held) c.send(answer(200, r.line))
    })
    const responses = await within(
      Promise.all(Array.from({ length: count }, (_, i) => get(`${server.url}/${i}`))),
      `${count} concurrent requests`,
      15_000,
    )
    const texts = await Promise.all(responses.map((response) => response.text()))
    expect(texts).toEqual(Array.from({ length: count }, (_, i) => `GET /${i} HTTP/1.1`))
    expect(server.accepted).toBe(count)
    await waitFor('the client to close the connections past 128', () => server.closed === count - 128)
    closeIdleUpstreams()
    await waitFor('every idle connection to close', () => server.closed === count)
  }, 20_000)
})

describe('streamed bodies', () => {
  test('a chunked body read piece by piece as it arrives, then null', async () => {
    const server = rawServer((connection) =>
      connection.send('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;x=1\r\nfirst\r\n'),
    )
    const response = await get(`${server.url}/stream`)
    expect(response.status).toBe(200)
    const decode = (bytes: Uint8Array | null) => (bytes ? Buffer.from(bytes).toString() : null)
    expect(decode(await response.read())).toBe('first')
    const connection = server.connections[0]!
    // A read waits for bytes that are not there yet.
    const second = response.read()
    connection.send('6\r\nsecond\r\n')
    expect(decode(await within(second, 'the second piece'))).toBe('second')
    const third = response.read()
    connection.send('5\r\nthird\r\n0\r\n\r\n')
    let rest = ''
    for (let piece = await within(third, 'the third piece'); piece; piece = await response.read())
      rest += decode(piece)
    expect(rest).toBe('third')
    expect(await response.read()).toBeNull()
    expect(await response.text()).toBe('')
  })

  test('the server closes mid-body: a pending read rejects with UpstreamConnectionError', async () => {
    const server = rawServer((connection) =>
      connection.send(`HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n${'x'.repeat(10)}`),
    )
    const response = await get(`${server.url}/`)
    const first = await response.read()
    expect(first && Buffer.from(first).toString()).toBe('x'.repeat(10))
    const pending = response.read()
    server.connections[0]!.socket.end()
    expect(await rejection(pending, 'the pending read')).toBeInstanceOf(UpstreamConnectionError)
    expect(await rejection(response.read(), 'a later read')).toBeInstanceOf(UpstreamConnectionError)
  })

  test('the server closes mid-chunked-body: text() rejects, never a short body', async () => {
    const server = rawServer((connection) => {
      connection.send('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\npart\r\n10\r\nonly')
      connection.socket.end()
    })
    const response = await get(`${server.url}/`)
    expect(await rejection(response.text(), 'text()')).toBeInstanceOf(UpstreamConnectionError)
  })

  test('reads before a break give only bytes that were sent, then reject', async () => {
    const sent = 'y'.repeat(3000)
    const server = rawServer((connection) => {
      connection.send(`HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n${sent}`)
      connection.socket.end()
    })
    const response = await get(`${server.url}/`)
    let got = ''
    let error: unknown = null
    try {
      for (let piece = await response.read(); piece; piece = await response.read()) got += Buffer.from(piece)
    } catch (caught) {
      error = caught
    }
    expect(error).toBeInstanceOf(UpstreamConnectionError)
    expect(sent.startsWith(got)).toBe(true)
  })

  test('cancel() during a stream: the pending read gets null, the server sees the close', async () => {
    const server = rawServer((connection, request) => {
      if (request.index === 0)
        connection.send('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\none\r\n')
      else connection.send(answer(200, 'next'))
    })
    const response = await get(`${server.url}/`)
    expect(Buffer.from((await response.read())!).toString()).toBe('one')
    const pending = response.read()
    response.cancel()
    expect(await within(pending, 'the pending read')).toBeNull()
    await waitFor('the server to see the close', () => server.closed === 1)
    expect(await response.read()).toBeNull()
    response.cancel()
    expect(await (await get(`${server.url}/`)).text()).toBe('next')
    expect(server.accepted).toBe(2)
  })

  test('cancel() after the body ended leaves the kept-alive connection for the next request', async () => {
    const server = rawServer((connection, request) => connection.send(answer(200, `answer ${request.index}`)))
    const response = await get(`${server.url}/`)
    expect(await response.text()).toBe('answer 0')
    response.cancel()
    expect(await (await get(`${server.url}/`)).text()).toBe('answer 1')
    expect(server.accepted).toBe(1)
    expect(server.closed).toBe(0)
  })

  test('backpressure: an unread body is not all buffered; reading it later gives the exact bytes', async () => {
    const total = 48 * 1024 * 1024
    const body = Buffer.alloc(total)
    for (let i = 0; i < total; i++) body[i] = (i * 31 + (i >>> 13)) & 255
    const server = rawServer((connection) => {
      connection.send(`HTTP/1.1 200 OK\r\ncontent-length: ${total}\r\n\r\n`)
      connection.send(body)
    })
    const response = await get(`${server.url}/big`)
    const connection = server.connections[0]!
    // Wait until the server's writes stall: the amount taken stays the same over several polls.
    let last = -1
    let steady = 0
    await waitFor(
      'the server writes to stall',
      () => {
        const now = connection.written
        steady = now === last ? steady + 1 : 0
        last = now
        return steady >= 20 || now >= total
      },
      15_000,
    )
    // What the kernel buffers hold is a few MB at most; the rest must wait for the reader.
    expect(connection.written).toBeLessThan(total / 2)
    const got = await within(readAll(response), 'reading the whole body', 30_000)
    expect(got.length).toBe(total)
    expect(got.equals(body)).toBe(true)
    expect(connection.written).toBe(total + `HTTP/1.1 200 OK\r\ncontent-length: ${total}\r\n\r\n`.length)
  }, 60_000)

  for (const then of ['left unread', 'cancelled'] as const) {
    test(`a body that ended while reading was paused (${then}): its connection still serves the next request`, async () => {
      // One write of 100 KB: it arrives in one read, past the 64 KB pause mark, and ends the body, so
      // the connection goes back to the pool while reading from it is paused.
      const big = Buffer.alloc(100 * 1024, 'b')
      const server = rawServer((connection, request) => {
        if (request.index === 0)
          connection.send(
            Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: ${big.length}\r\n\r\n`), big]),
          )
        else connection.send(answer(200, `answer ${request.index}`))
      })
      const first = await get(`${server.url}/big`)
      await waitFor('the server to send the whole first answer', () => server.connections[0]!.unsent === null)
      if (then === 'cancelled') first.cancel()
      // The first answer is not read (or given up); a second request to the origin must be answered.
      const second = await within(get(`${server.url}/next`), 'the second request')
      expect(await within(second.text(), 'the second body')).toBe('answer 1')
      if (then === 'left unread') expect((await readAll(first)).equals(big)).toBe(true)
    }, 20_000)
  }
})

describe('abort', () => {
  test('AbortSignal.timeout before the head: rejects with its TimeoutError, the connection closes', async () => {
    const server = rawServer(() => {})
    const signal = AbortSignal.timeout(100)
    const error = await rejection(get(`${server.url}/`, signal))
    expect(error).toBe(signal.reason)
    expect((error as Error).name).toBe('TimeoutError')
    // On a busy machine the timer may fire before the request reached the server: whatever the
    // call opened is closed either way.
    expect(server.requests.length).toBeLessThanOrEqual(1)
    await waitFor('the server to see the close', () => server.closed === server.connections.length)
  })

  test('controller.abort() before the head: rejects with its AbortError, the connection closes', async () => {
    const server = rawServer(() => {})
    const controller = new AbortController()
    const call = get(`${server.url}/`, controller.signal)
    await waitFor('the request to arrive', () => server.requests.length === 1)
    controller.abort()
    const error = await rejection(call)
    expect(error).toBe(controller.signal.reason)
    expect((error as Error).name).toBe('AbortError')
    await waitFor('the server to see the close', () => server.closed === 1)
  })

  test('a custom abort reason is the rejection', async () => {
    const server = rawServer(() => {})
    const controller = new AbortController()
    const call = get(`${server.url}/`, controller.signal)
    await waitFor('the request to arrive', () => server.requests.length === 1)
    const reason = new Error('client went away')
    controller.abort(reason)
    expect(await rejection(call)).toBe(reason)
  })

  test('an already aborted signal: rejects with its reason and opens no connection', async () => {
    const server = rawServer((connection) => connection.send(answer(200, 'ok')))
    const controller = new AbortController()
    controller.abort()
    const error = await rejection(get(`${server.url}/`, controller.signal))
    expect(error).toBe(controller.signal.reason)
    // A later call goes through the event loop and the server: it is the only connection.
    expect(await (await get(`${server.url}/`)).text()).toBe('ok')
    expect(server.accepted).toBe(1)
    expect(server.requests).toHaveLength(1)
  })

  test('abort while connecting: rejects with the reason and the connection, once open, is closed', async () => {
    const server = rawServer((connection) => connection.send(answer(200, 'ok')))
    const controller = new AbortController()
    const call = get(`${server.url}/`, controller.signal)
    // Aborted in the same tick: the connection is still opening.
    controller.abort()
    expect(await rejection(call)).toBe(controller.signal.reason)
    // The connection still opens (the connect was under way), and the client then closes it.
    await waitFor('the opened connection to be closed', () => server.accepted === 1 && server.closed === 1)
    expect(await (await get(`${server.url}/`)).text()).toBe('ok')
    expect(server.accepted).toBe(2)
  })

  test('abort during the body: the pending read rejects with the reason, the connection closes', async () => {
    const server = rawServer((connection) =>
      connection.send('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\ndata\r\n'),
    )
    const controller = new AbortController()
    const response = await get(`${server.url}/`, controller.signal)
    expect(Buffer.from((await response.read())!).toString()).toBe('data')
    const pending = response.read()
    const reason = new DOMException('stop', 'AbortError')
    controller.abort(reason)
    expect(await rejection(pending, 'the pending read')).toBe(reason)
    await waitFor('the server to see the close', () => server.closed === 1)
    expect(await rejection(response.read(), 'a later read')).toBe(reason)
  })

  test('aborting after the body ended changes nothing: the connection stays pooled', async () => {
    const server = rawServer((connection, request) => connection.send(answer(200, `answer ${request.index}`)))
    const controller = new AbortController()
    const response = await get(`${server.url}/`, controller.signal)
    expect(await response.text()).toBe('answer 0')
    controller.abort()
    expect(await response.read()).toBeNull()
    expect(await (await get(`${server.url}/`)).text()).toBe('answer 1')
    expect(server.accepted).toBe(1)
  })
})

describe('deadline', () => {
  const timed = (url: string, ms: number, until: 'body' | 'end') =>
    upstreamRequest(url, { method: 'GET', headers: {}, deadline: { ms, until } })
  // A deadline that what a local server sends at once meets even on a busy machine; the tests that
  // wait for it to pass (a stall) take that long.
  const IN_TIME = 2_000
  const isTimeout = (error: unknown) => (error as Error).name === 'TimeoutError'

  test('no head in time: rejects with a TimeoutError, the connection closes', async () => {
    const server = rawServer(() => {})
    const error = await rejection(timed(`${server.url}/`, 100, 'body'))
    expect(isTimeout(error)).toBe(true)
    expect(server.requests).toHaveLength(1)
    await waitFor('the server to see the close', () => server.closed === 1)
  })

  test("until 'end': a body that stalls past it fails the pending read, the connection closes", async () => {
    const server = rawServer((connection) =>
      connection.send('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\ndata\r\n'),
    )
    const response = await timed(`${server.url}/`, IN_TIME, 'end')
    expect(Buffer.from((await response.read())!).toString()).toBe('data')
    expect(isTimeout(await rejection(response.read(), 'the stalled read'))).toBe(true)
    await waitFor('the server to see the close', () => server.closed === 1)
  })

  test("until 'end': a whole answer in time ends it; the connection is pooled and never cut", async () => {
    const server = rawServer((connection, request) => connection.send(answer(200, `answer ${request.index}`)))
    expect(await (await timed(`${server.url}/`, IN_TIME, 'end')).text()).toBe('answer 0')
    // Well past the deadline, the pooled connection is still open and carries the next request.
    await Bun.sleep(IN_TIME + 150)
    expect(server.closed).toBe(0)
    expect(await (await get(`${server.url}/`)).text()).toBe('answer 1')
    expect(server.accepted).toBe(1)
  })

  test("until 'body': a 2xx head without body bytes in time fails the first read", async () => {
    const server = rawServer((connection) =>
      connection.send('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n'),
    )
    const response = await timed(`${server.url}/`, IN_TIME, 'body')
    expect(response.status).toBe(200)
    expect(isTimeout(await rejection(response.read(), 'the first read'))).toBe(true)
    await waitFor('the server to see the close', () => server.closed === 1)
  })

  test("until 'body': a 2xx stream whose first bytes came in time may run past it, and arrives whole", async () => {
    let stream: RawConnection | undefined
    const server = rawServer((connection) => {
      stream = connection
      connection.send('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n')
    })
    const response = await timed(`${server.url}/`, IN_TIME, 'body')
    expect(Buffer.from((await response.read())!).toString()).toBe('first')
    const pending = response.read()
    await Bun.sleep(IN_TIME + 150)
    stream!.send('4\r\nlast\r\n0\r\n\r\n')
    expect(Buffer.from((await within(pending, 'the late read'))!).toString()).toBe('last')
    expect(await response.read()).toBeNull()
    expect(server.closed).toBe(0)
  })

  test("until 'body': an error answer's body is read to its end under it, so a stalled one ends", async () => {
    const server = rawServer((connection) =>
      connection.send('HTTP/1.1 503 X\r\ncontent-length: 100\r\n\r\n{"error":'),
    )
    const response = await timed(`${server.url}/`, IN_TIME, 'body')
    expect(response.status).toBe(503)
    expect(isTimeout(await rejection(response.text(), 'the stalled error body'))).toBe(true)
    await waitFor('the server to see the close', () => server.closed === 1)
  })

  test('a TLS handshake that never ends: rejects with a TimeoutError and the socket is closed', async () => {
    // A TCP server that accepts and never answers: the client's handshake waits on it.
    const server = rawServer(() => {})
    const error = await rejection(timed(`https://127.0.0.1:${server.port}/`, 150, 'body'))
    expect(isTimeout(error)).toBe(true)
    expect(server.accepted).toBe(1)
    await waitFor('the server to see the close', () => server.closed === 1)
  })

  test('a retry on a new connection runs under the same deadline', async () => {
    // The kept-alive connection is dropped on the second request; the retry's server never answers.
    const server = rawServer((connection, request) => {
      if (request.index === 0) connection.send(answer(200, 'first'))
      else if (connection.id === 0) connection.socket.end()
    })
    expect(await (await get(`${server.url}/`)).text()).toBe('first')
    const error = await rejection(timed(`${server.url}/`, 200, 'body'))
    expect(isTimeout(error)).toBe(true)
    expect(server.accepted).toBe(2)
    expect(server.requests).toHaveLength(3)
    await waitFor('both connections closed', () => server.closed === 2)
  })
})

describe('maxBodyBytes', () => {
  const BOUND = 64 * 1024
  const bounded = (url: string) => upstreamRequest(url, { method: 'GET', headers: {}, maxBodyBytes: BOUND })

  /** Reads until the body ends or the read rejects: the bytes handed out, and the rejection. */
  async function readBounded(response: UpstreamResponse) {
    let handed = 0
    try {
      for (let part = await response.read(); part; part = await response.read()) handed += part.length
      return { handed, error: null }
    } catch (error) {
      return { handed, error }
    }
  }

  const framings = {
    'no length (until the close)': (body: Buffer) => [`HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n`, body],
    chunked: (body: Buffer) => [
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n',
      `${body.length.toString(16)}\r\n`,
      body,
      '\r\n0\r\n\r\n',
    ],
  }
  for (const [name, framing] of Object.entries(framings)) {
    test(`a body past it (${name}): no more than the bound is handed out, then UpstreamBodyTooLarge; the connection closes`, async () => {
      const server = rawServer((connection) => {
        for (const piece of framing(Buffer.alloc(16 * BOUND, 'a'))) connection.send(piece)
      })
      const response = await bounded(`${server.url}/big`)
      expect(response.status).toBe(200)
      const { handed, error } = await within(readBounded(response), 'reading the body')
      expect(error).toBeInstanceOf(UpstreamBodyTooLarge)
      expect(handed).toBeLessThanOrEqual(BOUND)
      await waitFor('the server to see the close', () => server.closed === 1)
    })
  }

  test('a chunked body whose framing runs past it (1-byte chunks, each with a long extension): UpstreamBodyTooLarge; the connection closes', async () => {
    const tinyChunk = `1;e=${'x'.repeat(4_000)}\r\na\r\n`
    const server = rawServer((connection) =>
      connection.send(
        `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${tinyChunk.repeat(4 * 1024)}0\r\n\r\n`,
      ),
    )
    const response = await bounded(`${server.url}/`)
    const { handed, error } = await within(readBounded(response), 'reading the body')
    expect(error).toBeInstanceOf(UpstreamBodyTooLarge)
    // The body's own bytes are far below the bound: its framing is what passed it.
    expect(handed).toBeLessThan(BOUND / 64)
    await waitFor('the server to see the close', () => server.closed === 1)
  })

  test('a chunked body of exactly the bound, in small chunks with short extensions, arrives whole', async () => {
    const piece = 'c'.repeat(16)
    const server = rawServer((connection) =>
      connection.send(
        `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${`10;ext=1\r\n${piece}\r\n`.repeat(BOUND / 16)}0\r\n\r\n`,
      ),
    )
    expect(await (await bounded(`${server.url}/`)).text()).toBe('c'.repeat(BOUND))
  })

  test('a Content-Length above it: the head resolves with its status, the first read rejects, the connection closes', async () => {
    // The head alone: the body is never sent, so a client waiting for it would wait for ever.
    const server = rawServer((connection) =>
      connection.send(`HTTP/1.1 500 X\r\ncontent-length: ${BOUND + 1}\r\n\r\n`),
    )
    const response = await bounded(`${server.url}/`)
    expect(response.status).toBe(500)
    expect(await rejection(response.read(), 'the first read')).toBeInstanceOf(UpstreamBodyTooLarge)
    await waitFor('the server to see the close', () => server.closed === 1)
  })

  test('a body of exactly the bound arrives whole, and its connection serves the next request', async () => {
    const server = rawServer((connection) => connection.send(answer(200, 'b'.repeat(BOUND))))
    expect(await (await bounded(`${server.url}/1`)).text()).toBe('b'.repeat(BOUND))
    expect(await (await bounded(`${server.url}/2`)).text()).toHaveLength(BOUND)
    expect(server.accepted).toBe(1)
  })
})

describe('failures to connect and refused answers', () => {
  test('connection refused: rejects with UpstreamConnectionError, not as an abort or a timeout', async () => {
    // Port 9 (discard): nothing listens there.
    const error = await rejection(get('http://127.0.0.1:9/'))
    expect(error).toBeInstanceOf(UpstreamConnectionError)
    expect((error as Error).name).not.toBe('AbortError')
    expect((error as Error).name).not.toBe('TimeoutError')
  })

  test('a gzip answer rejects with UpstreamConnectionError and the connection is closed', async () => {
    const server = rawServer((connection) => {
      const gz = gzipSync('{"a":1}')
      connection.send(
        Buffer.concat([
          Buffer.from(`HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: ${gz.length}\r\n\r\n`),
          gz,
        ]),
      )
    })
    const error = await rejection(get(`${server.url}/`))
    expect(error).toBeInstanceOf(UpstreamConnectionError)
    // It came although identity was asked for.
    expect(/\r\naccept-encoding: *([^\r]*)/i.exec(server.requests[0]!.head)?.[1]).toBe('identity')
    await waitFor('the server to see the close', () => server.closed === 1)
  })

  test('a gzip answer from Bun.serve rejects too', async () => {
    const { url } = serve(
      () =>
        new Response(gzipSync('hello'), {
          headers: { 'content-encoding': 'gzip', 'content-type': 'text/plain' },
        }),
    )
    expect(await rejection(get(`${url}/`))).toBeInstanceOf(UpstreamConnectionError)
  })

  test('content-encoding: identity is accepted', async () => {
    const server = rawServer((connection) =>
      connection.send(answer(200, 'plain', { 'content-encoding': 'identity' })),
    )
    expect(await (await get(`${server.url}/`)).text()).toBe('plain')
  })
})

describe('TLS', () => {
  const cert = selfSignedCert('localhost')
  afterAll(() => cert.remove())
  const tls = () => cert.tls()
  const certPath = cert.certPath

  test('a self-signed certificate is refused with UpstreamConnectionError; nothing reaches the handler', async () => {
    let handled = 0
    const server = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      tls: tls(),
      fetch() {
        handled++
        return new Response('secret')
      },
    })
    stoppers.push(() => server.stop(true))
    for (const host of ['127.0.0.1', 'localhost']) {
      const error = await rejection(get(`https://${host}:${server.port}/`), `https to ${host}`)
      expect(error).toBeInstanceOf(UpstreamConnectionError)
    }
    expect(handled).toBe(0)
  })

  test('with the certificate trusted: its name is accepted, an IP it does not name is refused', async () => {
    // A child process that trusts the test's certificate (NODE_EXTRA_CA_CERTS is read at start).
    const server = Bun.serve({
      hostname: 'localhost',
      port: 0,
      tls: tls(),
      fetch: (request) => new Response(`hello ${new URL(request.url).pathname}`),
    })
    stoppers.push(() => server.stop(true))
    const script = `
      import { upstreamRequest, closeIdleUpstreams, UpstreamConnectionError } from ${JSON.stringify(join(import.meta.dir, '../../src/upstream/client.ts'))}
      const out = {}
      for (const host of ['localhost', '127.0.0.1']) {
        try {
          const response = await upstreamRequest('https://' + host + ':' + ${server.port} + '/p', { method: 'GET', headers: {} })
          out[host] = 'ok ' + response.status + ' ' + (await response.text())
        } catch (error) {
          out[host] = error instanceof UpstreamConnectionError ? 'refused' : 'other: ' + error
        }
      }
      closeIdleUpstreams()
      console.log(JSON.stringify(out))
    `
    const child = Bun.spawn([process.execPath, '-e', script], {
      env: { ...process.env, NODE_EXTRA_CA_CERTS: certPath },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const [stdout, stderr, code] = await within(
      Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]),
      'the child process',
      15_000,
    )
    expect({ code, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, stderr: '' })
    const out = JSON.parse(stdout.trim().split('\n').at(-1)!)
    expect(out.localhost).toBe('ok 200 hello /p')
    expect(out['127.0.0.1']).toBe('refused')
  }, 20_000)
})
