// A host that resolves to several public addresses is tried address by address, within the one
// timeout: an address that refuses (a node down, IPv6 unreachable while IPv4 works) does not fail
// the try while another is up. Only a connection that never opened moves on: one that took the
// request and then broke is a failed try, never sent again. A name with any non-public address is
// refused whole, as before. Loopback stands in for public space (the test-only setting); 127.0.0.2
// and ::1 refuse, since the receivers listen on other addresses. An address that never answers a
// connection (127.0.0.3: a stopped redis-server whose accept queue is full, so the kernel drops each
// SYN) costs a short delay, not the try's deadline: the next address is tried meanwhile.
import { afterAll, describe, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { interleaved } from '../../src/webhooks/address-order.ts'
import { postEvent } from '../../src/webhooks/post.ts'
import { verify } from '../../src/webhooks/signing.ts'
import { adminFetch, keyFetch } from '../helpers/accounts.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier } from '../helpers/suppliers.ts'
import { until } from '../helpers/wait.ts'
import { registerWebhook, startReceiver } from './helpers.ts'

const stops: (() => unknown)[] = []
afterAll(async () => {
  for (const stop of stops) await stop()
})

const policy = (addresses: string[]) => ({ allowLoopback: true, resolve: async () => addresses })

/** A receiver on 127.0.0.1 (the live address) and its URL by a name only the test's resolver knows. */
function liveReceiver() {
  const receiver = startReceiver()
  stops.push(() => receiver.stop())
  const port = Number(new URL(receiver.url).port)
  return { receiver, port, url: `http://hook.example:${port}/hook` }
}

/** Whether a TCP connection to the address opens: a request's answer, or null when refused. */
function opened(host: string, port: number, send?: string): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = connect({ host, port })
    socket.once('error', () => resolve(null))
    socket.once('connect', () => {
      if (send === undefined) return resolve('')
      socket.write(send)
      socket.once('data', (data) => {
        socket.destroy()
        resolve(data.toString())
      })
    })
  })
}

/**
 * 127.0.0.3:`port` made silent: a redis-server listening there with an accept queue of one,
 * stopped (SIGSTOP) and its queue filled, so a connection's SYN is never answered.
 */
async function silentAddress(port: number) {
  const server = Bun.spawn(
    ['redis-server', '--bind', '127.0.0.3', '--port', String(port), '--tcp-backlog', '1', '--save', ''],
    { stdout: 'ignore', stderr: 'ignore' },
  )
  stops.push(async () => {
    process.kill(server.pid, 'SIGCONT')
    server.kill()
    await server.exited
  })
  // Answered PING: the server accepted and served it, so it holds no place in the queue.
  await until(async () => (await opened('127.0.0.3', port, 'PING\r\n')) === '+PONG\r\n')
  process.kill(server.pid, 'SIGSTOP')
  // A queue of one holds two connections; every SYN after them is dropped.
  const held = await Promise.all([opened('127.0.0.3', port), opened('127.0.0.3', port)])
  expect(held).toEqual(['', ''])
}

describe('postEvent over several addresses', () => {
  test("addresses are tried with families alternating, the resolver's first family first", () => {
    expect(interleaved(['::1', '::2', '::3', '127.0.0.1', '127.0.0.2'])).toEqual([
      '::1',
      '127.0.0.1',
      '::2',
      '127.0.0.2',
      '::3',
    ])
    expect(interleaved(['127.0.0.1', '::1', '127.0.0.2'])).toEqual(['127.0.0.1', '::1', '127.0.0.2'])
  })

  test('a refusing IPv4 address, then the live one: delivered once', async () => {
    const { receiver, url } = liveReceiver()
    const outcome = await postEvent(url, {}, '{}', policy(['127.0.0.2', '127.0.0.1']), 2_000)
    expect(outcome).toEqual({ ok: true, httpStatus: 200, error: null })
    expect(receiver.received.length).toBe(1)
  })

  test('an unreachable IPv6 address, then the live IPv4 one: delivered once', async () => {
    const { receiver, url } = liveReceiver()
    const outcome = await postEvent(url, {}, '{}', policy(['::1', '127.0.0.1']), 2_000)
    expect(outcome).toEqual({ ok: true, httpStatus: 200, error: null })
    expect(receiver.received.length).toBe(1)
  })

  test('a silent address, then the live one: the live one is tried meanwhile and delivered once', async () => {
    const { receiver, url, port } = liveReceiver()
    await silentAddress(port)
    const outcome = await postEvent(url, {}, '{}', policy(['127.0.0.3', '127.0.0.1']), 10_000)
    expect(outcome).toEqual({ ok: true, httpStatus: 200, error: null })
    expect(receiver.received.length).toBe(1)
  })

  test('only a silent address: the try ends at its deadline, as a timeout', async () => {
    const { receiver, url, port } = liveReceiver()
    await silentAddress(port)
    const outcome = await postEvent(url, {}, '{}', policy(['127.0.0.3', '::1']), 1_000)
    expect(outcome).toEqual({ ok: false, httpStatus: null, error: 'no answer in 1000 ms' })
    expect(receiver.received).toEqual([])
  })

  test('only dead addresses: a failed try, well within the timeout', async () => {
    const { receiver, url } = liveReceiver()
    const started = Date.now()
    const outcome = await postEvent(url, {}, '{}', policy(['127.0.0.2', '::1', '127.0.0.3']), 5_000)
    expect(outcome).toEqual({ ok: false, httpStatus: null, error: 'connection failed' })
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(receiver.received).toEqual([])
  })

  test('a connection that took the request and broke is not tried again elsewhere', async () => {
    const { receiver, port } = liveReceiver()
    // 127.0.0.2 accepts, reads the request, and closes without an answer; 127.0.0.1 would accept.
    let requests = 0
    const breaking = Bun.listen({
      hostname: '127.0.0.2',
      port,
      socket: {
        data(socket) {
          requests++
          socket.end()
        },
      },
    })
    stops.push(() => breaking.stop(true))
    const outcome = await postEvent(
      `http://hook.example:${port}/hook`,
      {},
      '{}',
      policy(['127.0.0.2', '127.0.0.1']),
      2_000,
    )
    expect(outcome).toMatchObject({ ok: false, httpStatus: null })
    expect(requests).toBe(1)
    expect(receiver.received).toEqual([])
  })

  test('a name with one non-public address among live ones is refused whole, nothing sent', async () => {
    const { receiver, url } = liveReceiver()
    const outcome = await postEvent(url, {}, '{}', policy(['127.0.0.1', '10.0.0.1']), 2_000)
    expect(outcome).toMatchObject({ ok: false, httpStatus: null })
    expect(outcome.error).toContain('public addresses only')
    expect(receiver.received).toEqual([])
  })
})

describe('delivery to a name with a dead address', () => {
  let stack: TestStack
  afterAll(async () => {
    await stack?.stop()
  })

  test('lands once, signed; a name with dead addresses only logs a failed try', async () => {
    const { receiver, port } = liveReceiver()
    const answers: Record<string, string[]> = {
      'live.example': ['127.0.0.2', '127.0.0.1'],
      'dead.example': ['127.0.0.2', '::1'],
    }
    stack = await startStack({
      env: { SVC_WEBHOOK_ALLOW_LOOPBACK: '1' },
      tune: (config) => {
        config.webhooks.timeoutMs = 2_000
        config.webhooks.backoffMs = 60_000
        config.webhooks.pollMs = 50
        config.webhooks.resolve = async (host) => answers[host] ?? []
      },
    })
    const supplier = await signInSupplier(stack)
    const register = async (host: string) => {
      const created = await registerWebhook(stack, supplier.apiKey, '/v1/supplier', {
        url: `http://${host}:${port}/hook`,
        events: ['supplier.suspended'],
      })
      expect(created.status).toBe(201)
      return (await created.json()) as { id: string; secret: string }
    }
    const live = await register('live.example')
    const dead = await register('dead.example')
    const log = async (id: string) =>
      (
        (await (await keyFetch(stack, supplier.apiKey, `/v1/supplier/webhooks/${id}/deliveries`)).json()) as {
          deliveries: { ok: boolean; httpStatus: number | null; error: string | null; attempt: number }[]
        }
      ).deliveries
    const suspended = await adminFetch(stack, `/admin/v1/suppliers/${supplier.supplierId}`, {
      method: 'PATCH',
      json: { status: 'suspended' },
    })
    expect(suspended.status).toBe(200)

    await until(async () => (await log(live.id)).length >= 1 && (await log(dead.id)).length >= 1)
    expect(receiver.received.length).toBe(1)
    const got = receiver.received[0]!
    expect(verify(live.secret, got.id, got.timestamp, got.body, got.signature)).toBe(true)
    expect((await log(live.id)).map((d) => [d.ok, d.httpStatus, d.attempt])).toEqual([[true, 200, 1]])
    expect((await log(dead.id)).map((d) => [d.ok, d.httpStatus, d.error, d.attempt])).toEqual([
      [false, null, 'connection failed', 1],
    ])
  })
})
