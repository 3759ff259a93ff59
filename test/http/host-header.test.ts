// A Host header that is no host name: Bun then gives the request a URL of its path alone. Every
// route answers a 400 in the contract's shape (Anthropic's on /v1/messages), and nothing changes.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { digestApiKey } from '../../src/accounts/api-keys.ts'
import type { TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { snapshotKeys, startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
beforeAll(async () => {
  stack = await startStack()
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack)
})
afterAll(() => stack.stop())

/** One HTTP/1.1 request over a socket of its own, answered whole (the server closes after it). */
async function raw(request: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(stack.url)
  let answer = ''
  const done = Promise.withResolvers<void>()
  const socket = await Bun.connect({
    hostname,
    port: Number(port),
    socket: {
      data(_s, data) {
        answer += data.toString('latin1')
        const head = answer.indexOf('\r\n\r\n')
        const length = /content-length: (\d+)/i.exec(answer)
        if (head >= 0 && length && answer.length - head - 4 >= Number(length[1])) done.resolve()
      },
      close: () => done.resolve(),
    },
  })
  socket.write(request)
  await done.promise
  socket.end()
  const head = answer.indexOf('\r\n\r\n')
  return { status: Number(answer.split(' ')[1]), body: answer.slice(head + 4) }
}

test('every route answers a bad Host with a 400 in its error shape, nothing changed', async () => {
  const chat = '{"model":"llama-3.3-70b","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
  const key = `Authorization: Bearer ${buyer.apiKey}\r\n`
  const json = (body: string) =>
    `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
  const before = await snapshotKeys(stack.store, stack.keys.prefix)
  for (const host of ['a b', 'a"b', '<x>']) {
    for (const [path, request] of [
      ['/v1/agent/me', `GET /v1/agent/me HTTP/1.1\r\nHost: ${host}\r\n${key}\r\n`],
      ['/nope', `GET /nope HTTP/1.1\r\nHost: ${host}\r\n\r\n`],
      ['/v1/chat/completions', `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\n${key}${json(chat)}`],
      ['/v1/messages', `POST /v1/messages HTTP/1.1\r\nHost: ${host}\r\n${key}${json('{}')}`],
      ['/v1/x402/signup', `POST /v1/x402/signup HTTP/1.1\r\nHost: ${host}\r\n${json('{}')}`],
    ] as const) {
      const { status, body } = await raw(request)
      expect({ host, path, status }).toEqual({ host, path, status: 400 })
      const answer = JSON.parse(body) as { type?: string; error: { type: string; message: string } }
      // Anthropic's shape on its route: the same error under a top-level type.
      if (path === '/v1/messages') expect(answer.type).toBe('error')
      expect(answer.error.type).toBe('invalid_request_error')
      expect(answer.error.message).toContain('Host')
    }
  }
  const after = await snapshotKeys(stack.store, stack.keys.prefix)
  const touched = stack.keys.apiKey(digestApiKey(buyer.apiKey))
  delete before[touched]
  delete after[touched]
  expect(after).toEqual(before)
})
