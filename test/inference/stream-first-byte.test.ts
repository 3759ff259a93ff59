// A stream's first byte waits for the supplier's first frame and nothing else: the response head and
// that frame leave in one write, while the supplier still holds back the rest of its answer, as a
// raw socket on the client's side reads them.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { adminFetch, type TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer } from '../helpers/buyers.ts'
import { hostileSupplier, httpHead } from '../helpers/hostile-supplier.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

const chunk = (fields: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-up', object: 'chat.completion.chunk', created: 1, model: 'm', ...fields })}\n\n`
const FIRST = chunk({ choices: [{ index: 0, delta: { content: 'first-words' }, finish_reason: null }] })
const REST =
  chunk({ choices: [{ index: 0, delta: { content: ' and more' }, finish_reason: 'stop' }] }) +
  chunk({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } }) +
  'data: [DONE]\n\n'

/** Opened by the test once the client has its first read: until then the supplier sends nothing more. */
let openGate = () => {}
const supplier = hostileSupplier(() => ({
  head: httpHead(200, { 'content-type': 'text/event-stream', connection: 'close' }),
  body: FIRST,
  gate: new Promise<void>((resolve) => {
    openGate = resolve
  }),
  tail: REST,
  close: true,
}))

let stack: TestStack
let buyer: TestAccount
beforeAll(async () => {
  stack = await startStack()
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: { upstreamBaseUrl: supplier.url, upstreamApiKey: 'gated-key', askCents: 30, capacityDiem: '50' },
  })
  expect(offer.status).toBe(201)
  buyer = await fundedBuyer(stack)
})
afterAll(async () => {
  await stack.stop()
  supplier.stop()
})

/** The reads of one streamed chat on a raw socket, the first handed to `onFirst` as it arrives. */
function rawStream(onFirst: () => void): Promise<string[]> {
  const url = new URL(stack.url)
  const body = JSON.stringify({
    model: 'llama-3.3-70b',
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 16,
    stream: true,
  })
  const request =
    'POST /v1/chat/completions HTTP/1.1\r\n' +
    `host: ${url.host}\r\nauthorization: Bearer ${buyer.apiKey}\r\n` +
    `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  const reads: string[] = []
  return new Promise((resolve, reject) => {
    Bun.connect({
      hostname: url.hostname,
      port: Number(url.port),
      socket: {
        open: (socket) => {
          socket.write(request)
        },
        data: (socket, bytes) => {
          reads.push(Buffer.from(bytes).toString('utf8'))
          if (reads.length === 1) onFirst()
          // The chunked body's last chunk: the stream is over.
          if (reads.join('').endsWith('\r\n0\r\n\r\n')) {
            socket.end()
            resolve(reads)
          }
        },
        close: () => resolve(reads),
        error: (_socket, error) => reject(error),
      },
    }).catch(reject)
  })
}

test("the head and the supplier's first frame arrive in one read, before the supplier sends more", async () => {
  let rest = 0
  const reads = await rawStream(() => {
    rest = supplier.calls.at(-1)?.sent ?? -1
    openGate()
  })
  const first = reads[0]!
  // The whole head and the first frame, in the client's very first read ...
  expect(first).toStartWith('HTTP/1.1 200')
  expect(first).toContain('\r\n\r\n')
  expect(first).toContain('"first-words"')
  // ... sent while the supplier had sent no more than its head and that frame.
  const held = httpHead(200, { 'content-type': 'text/event-stream', connection: 'close' })
  expect(rest).toBe(Buffer.byteLength(`${held}\r\n\r\n${FIRST}`))
  // The rest follows once the supplier sends it: its content, then the cleared end.
  const whole = reads.join('')
  expect(whole).toContain('" and more"')
  expect(whole).toContain('"object":"svc.cost"')
  expect(whole).toContain('data: [DONE]')
})
