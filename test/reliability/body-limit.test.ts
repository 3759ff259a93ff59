// A body past SVC_MAX_BODY_BYTES is a 413 body_too_large in the contract's shape, whatever
// its size: declared past twice the bound, or chunked past it on a route that authenticates first.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

const MAX = 65_536
let stack: TestStack
let buyer: TestAccount
beforeAll(async () => {
  stack = await startStack({ env: { SVC_MAX_BODY_BYTES: String(MAX) } })
  buyer = await fundedBuyer(stack)
})
afterAll(() => stack.stop())

const moneyKeys = async () =>
  Object.fromEntries(
    Object.entries(await snapshotKeys(stack.store, stack.keys.prefix)).filter(
      ([k]) => !k.includes(':apikey:'),
    ),
  )

/** One raw HTTP/1.1 exchange: the head as given, then `body` bytes, and what came back. */
async function raw(head: string, body: Uint8Array | null): Promise<string> {
  const { hostname, port } = new URL(stack.url)
  let answer = ''
  const done = Promise.withResolvers<void>()
  const socket = await Bun.connect({
    hostname,
    port: Number(port),
    socket: {
      data(_s, data) {
        answer += data.toString()
        if (/\r\n\r\n/.test(answer)) {
          const length = /content-length: (\d+)/i.exec(answer)
          const bodyAt = answer.indexOf('\r\n\r\n') + 4
          if (!length || answer.length - bodyAt >= Number(length[1])) done.resolve()
        }
      },
      close: () => done.resolve(),
      error: () => done.resolve(),
    },
  })
  socket.write(head)
  if (body) {
    for (let at = 0; at < body.length; at += 16_384) {
      if (answer) break
      socket.write(body.subarray(at, at + 16_384))
      await Bun.sleep(0)
    }
  }
  // The answer comes, or the test's own deadline fails it.
  await done.promise
  socket.end()
  return answer
}

const json = (bytes: number) => new TextEncoder().encode(JSON.stringify({ name: 'x'.repeat(bytes) }))

for (const path of ['/v1/agent/keys', '/v1/chat/completions', '/mcp']) {
  test(`${path}: a body declared past twice the bound is the contract's 413`, async () => {
    const before = await moneyKeys()
    const body = json(2 * MAX + 10)
    const answer = await raw(
      `POST ${path} HTTP/1.1\r\nHost: ${new URL(stack.url).host}\r\nAuthorization: Bearer ${buyer.apiKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      body,
    )
    expect(answer).toStartWith('HTTP/1.1 413')
    expect(answer).toContain('"code":"body_too_large"')
    expect(await moneyKeys()).toEqual(before)
  })
}

test('a chunked body past twice the bound on a route that authenticates first: the contract 413', async () => {
  const before = await moneyKeys()
  const body = json(8 * MAX)
  const response = await fetch(`${stack.url}/v1/agent/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
    body: new Blob([body]).stream(),
  })
  expect(response.status).toBe(413)
  expect(((await response.json()) as { error: { code: string } }).error.code).toBe('body_too_large')
  expect(await moneyKeys()).toEqual(before)
})
