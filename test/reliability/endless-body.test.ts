// With Bun's own body limit off (gateway.ts), no route may read a body without the bound:
// an endless chunked body on every route and method of the contract is answered while it is sent.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { signInSupplier, type TestSupplier } from '../helpers/suppliers.ts'

let stack: TestStack
let buyer: TestAccount
let supplier: TestSupplier
beforeAll(async () => {
  stack = await startStack({ env: { SVC_MAX_BODY_BYTES: '65536' } })
  buyer = await fundedBuyer(stack)
  supplier = await signInSupplier(stack)
})
afterAll(() => stack.stop())

async function endless(
  method: string,
  path: string,
  token: string,
): Promise<{ sent: number; answer: string }> {
  const { hostname, host, port } = new URL(stack.url)
  let answer = ''
  const answered = Promise.withResolvers<void>()
  const socket = await Bun.connect({
    hostname,
    port: Number(port),
    socket: {
      data(_s, data) {
        answer += data.toString()
        answered.resolve()
      },
      close: () => answered.resolve(),
      error: () => answered.resolve(),
    },
  })
  socket.write(
    `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\n` +
      'Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n' +
      'a\r\n{"model":"\r\n',
  )
  const piece = `2000\r\n${'x'.repeat(0x2000)}\r\n`
  let done = false
  void answered.promise.then(() => {
    done = true
  })
  let sent = 0
  const GIVE_UP = 32 * 1024 * 1024
  while (!done && sent < GIVE_UP) {
    if (socket.write(piece) < piece.length) await Bun.sleep(1)
    else sent += piece.length
  }
  // The answer comes (while the body was sent, or at once after it: a failure above), or the
  // test's own deadline fails it.
  await answered.promise
  socket.end()
  return { sent, answer }
}

test('every route and method answers an endless chunked body while it is sent', async () => {
  const spec = (await (await fetch(`${stack.url}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, unknown>>
  }
  const failures: string[] = []
  for (const [template, operations] of Object.entries(spec.paths)) {
    const path = template.replace(/\{[^}]+\}/g, 'x')
    const token =
      path.startsWith('/admin') || path === '/metrics'
        ? stack.config.adminToken
        : path.startsWith('/v1/supplier')
          ? supplier.apiKey
          : buyer.apiKey
    for (const method of ['GET', 'POST', 'PATCH', 'DELETE', 'PUT']) {
      const { sent, answer } = await endless(method, path, token)
      const status = answer.slice(9, 12)
      if (!answer || status.startsWith('5') || (status === '413' && !answer.includes('body_too_large')))
        failures.push(`${method} ${path}: sent ${sent}, ${answer.split('\r\n')[0] || 'no answer'}`)
      void operations
    }
  }
  expect(failures).toEqual([])
}, 300_000)
