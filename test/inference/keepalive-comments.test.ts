// A supplier that keeps its own stream alive with SSE comments (as upstreams do while a request
// queues or a model thinks) sends bytes, but nothing the relay passes on. The buyer must still hear
// a keep-alive every SVC_KEEPALIVE_MS: one that hears nothing is cut by the gateway's own idle
// timeout (Bun's, 120 s) and billed as a client that left, though it never did.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let buyer: TestAccount
let supplier: ReturnType<typeof Bun.serve>
/** The supplier's comments go on until the test lets it finish. */
let finish = false
let comments = 0

const USAGE = { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 }
const chunk = (body: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-k', object: 'chat.completion.chunk', model: 'llama-3.3-70b', ...body })}\n\n`

beforeAll(async () => {
  supplier = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch() {
      const encoder = new TextEncoder()
      let timer: Timer | undefined
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(encoder.encode(chunk({ choices: [{ index: 0, delta: { content: 'one' } }] })))
          // A comment every 20 ms: far more often than the 200 ms keep-alive the buyer is owed.
          timer = setInterval(() => {
            if (!finish) {
              comments += 1
              controller.enqueue(encoder.encode(': still working\n\n'))
              return
            }
            clearInterval(timer)
            controller.enqueue(
              encoder.encode(
                chunk({ choices: [{ index: 0, delta: { content: ' two three' }, finish_reason: 'stop' }] }) +
                  chunk({ choices: [], usage: USAGE }) +
                  'data: [DONE]\n\n',
              ),
            )
            controller.close()
          }, 20)
        },
        cancel() {
          clearInterval(timer)
        },
      })
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  stack = await startStack({ env: { SVC_KEEPALIVE_MS: '200', SVC_STREAM_IDLE_MS: '60000' } })
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: {
      upstreamBaseUrl: `http://127.0.0.1:${supplier.port}`,
      upstreamApiKey: 'commenting-key',
      askCents: 40,
      capacityDiem: '50',
    },
  })
  expect(offer.status).toBe(201)
  buyer = await fundedBuyer(stack, '1.000000')
})
afterAll(async () => {
  await stack.stop()
  supplier.stop(true)
})

test("a supplier's comments reach no one, yet the buyer hears keep-alives; then it is billed its usage", async () => {
  const before = await balances(stack, buyer.accountId)
  const response = await keyFetch(stack, buyer.apiKey, '/v1/chat/completions', {
    method: 'POST',
    json: { model: 'llama-3.3-70b', stream: true, messages: [{ role: 'user', content: 'think first' }] },
  })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ''
  // Hangs (the test's time limit) when no keep-alive ever comes while the supplier comments.
  while (!text.includes(': keep-alive\n\n')) text += decoder.decode((await reader.read()).value)
  // The supplier was commenting all along: its comments were never relayed.
  expect(comments).toBeGreaterThan(0)
  expect(text).not.toContain('still working')
  finish = true
  for (let part = await reader.read(); !part.done; part = await reader.read())
    text += decoder.decode(part.value)
  const frames = sseData(text)
  expect(frames.at(-1)).toBe('[DONE]')
  const cost = frames.at(-2) as { object: string; costUsdc: string }
  expect(cost.object).toBe('svc.cost')
  const charged = expectedCost(USAGE, 40)
  expect(cost.costUsdc).toBe((charged / 1e6).toFixed(6))
  await until(async () => (await balances(stack, buyer.accountId)).held === 0)
  expect(before.confirmed - (await balances(stack, buyer.accountId)).confirmed).toBe(charged)
}, 20_000)
