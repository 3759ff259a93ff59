// A supplier whose answer lies about its own framing: bytes past the end its Content-Length (or a
// 204) announced, a second answer nobody asked for in the same read, both a Transfer-Encoding and
// a Content-Length. The answer itself is read as framed; the connection it came on is never
// handed to another request, whose answer would otherwise start in the middle of this one's bytes.
import { afterEach, describe, expect, test } from 'bun:test'
import type { Socket, TCPSocketListener } from 'bun'
import { closeIdleUpstreams, upstreamRequest } from '../../src/upstream/client.ts'
import { until } from '../helpers/wait.ts'

interface Link {
  id: number
  received: Buffer
  requests: number
  closed: boolean
}

interface Server {
  url: string
  links: Link[]
  stop(): void
}

/** Answers the n-th request on each connection with `answer(link, n)`, written in one piece. */
function server(answer: (link: Link, n: number) => string): Server {
  const links: Link[] = []
  const listener: TCPSocketListener<Link> = Bun.listen<Link>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket: Socket<Link>) {
        socket.data = { id: links.length, received: Buffer.alloc(0), requests: 0, closed: false }
        links.push(socket.data)
      },
      data(socket, bytes) {
        const link = socket.data
        link.received = Buffer.concat([link.received, bytes])
        for (;;) {
          const end = link.received.indexOf('\r\n\r\n')
          if (end < 0) return
          const head = link.received.subarray(0, end).toString('latin1')
          const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0)
          if (link.received.length < end + 4 + length) return
          link.received = link.received.subarray(end + 4 + length)
          socket.write(answer(link, link.requests++))
        }
      },
      close(socket) {
        socket.data.closed = true
      },
      error(socket) {
        socket.data.closed = true
      },
    },
  })
  return { url: `http://127.0.0.1:${listener.port}`, links, stop: () => listener.stop(true) }
}

const stoppers: (() => void)[] = []
afterEach(() => {
  closeIdleUpstreams()
  for (const stop of stoppers.splice(0)) stop()
})

const post = async (url: string) => {
  const response = await upstreamRequest(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
  })
  return { status: response.status, text: await response.text() }
}

const ok = (body: string) => `HTTP/1.1 200 OK\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`

/** Each lie: the answer as sent, and the status and body it is read as. */
const LIES: [string, (n: number) => string, number, string][] = [
  [
    'a body longer than its Content-Length',
    (n) => `HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfirst and then some ${n}`,
    200,
    'first',
  ],
  ['a second answer, unasked, in the same read', (n) => `${ok(`one ${n}`)}${ok('unasked')}`, 200, 'one 0'],
  ['a 204 that carries a body', () => 'HTTP/1.1 204 No Content\r\n\r\nsmuggled', 204, ''],
  [
    'both Transfer-Encoding and Content-Length',
    () => 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
    200,
    'hello',
  ],
]

describe('an answer that lied about its framing: its connection is not reused', () => {
  for (const [name, lie, status, body] of LIES) {
    test(name, async () => {
      const s = server((link, n) => (link.id === 0 && n === 0 ? lie(n) : ok(`honest ${link.id}/${n}`)))
      stoppers.push(s.stop)
      expect(await post(s.url)).toEqual({ status, text: body })
      // The next request goes out on a fresh connection, and the lying one is closed.
      expect(await post(s.url)).toEqual({ status: 200, text: 'honest 1/0' })
      expect(s.links).toHaveLength(2)
      await until(() => s.links[0]!.closed)
    })
  }

  test('an honest answer still leaves its connection for the next request', async () => {
    const s = server((link, n) => ok(`honest ${link.id}/${n}`))
    stoppers.push(s.stop)
    expect(await post(s.url)).toEqual({ status: 200, text: 'honest 0/0' })
    expect(await post(s.url)).toEqual({ status: 200, text: 'honest 0/1' })
    expect(s.links).toHaveLength(1)
  })
})
