// A buyer that leaves an MCP `chat` call before its answer: the chat it asked for ends with it, as a
// REST call whose client leaves does (released, nothing charged), rather than run on to a charge
// for an answer no one reads.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { adminFetch, keyFetch, type TestAccount } from '../helpers/accounts.ts'
import { balances, fundedBuyer } from '../helpers/buyers.ts'
import { type HostileSupplier, hostileSupplier, httpHead } from '../helpers/hostile-supplier.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'
import { until } from '../helpers/wait.ts'

let stack: TestStack
let supplier: HostileSupplier
let buyer: TestAccount
let open: () => void = () => {}

const completion = JSON.stringify({
  id: 'chatcmpl-late',
  object: 'chat.completion',
  model: 'llama-3.3-70b',
  choices: [{ index: 0, message: { role: 'assistant', content: 'too late' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
})

beforeAll(async () => {
  // The head at once, the body only once the test opens the gate: the gateway waits on it.
  supplier = hostileSupplier(() => ({
    head: httpHead(200, { 'content-type': 'application/json', 'content-length': String(completion.length) }),
    gate: new Promise<void>((resolve) => {
      open = resolve
    }),
    tail: completion,
  }))
  stack = await startStack()
  const offer = await adminFetch(stack, '/admin/v1/offers', {
    method: 'POST',
    json: { upstreamBaseUrl: supplier.url, upstreamApiKey: 'gated-key', askCents: 40, capacityDiem: '50' },
  })
  expect(offer.status).toBe(201)
  buyer = await fundedBuyer(stack, '5.000000')
})
afterAll(async () => {
  open()
  await stack.stop()
  supplier.stop()
})

test('the MCP caller gone mid-chat: the supplier call is ended and nothing is charged', async () => {
  const leaving = new AbortController()
  const pending = keyFetch(stack, buyer.apiKey, '/mcp', {
    method: 'POST',
    headers: { accept: 'application/json, text/event-stream' },
    json: {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'chat', arguments: { model: 'llama-3.3-70b', prompt: 'hi', max_tokens: 8 } },
    },
    signal: leaving.signal,
  }).catch(() => null)
  await until(() => supplier.calls.length === 1 && supplier.calls[0]!.sent > 0)
  expect((await balances(stack, buyer.accountId)).held).toBeGreaterThan(0)
  leaving.abort()
  await pending
  // The gateway lets go of the supplier and of the hold, with the answer still unsent.
  await until(() => supplier.calls[0]!.closed)
  await until(async () => (await balances(stack, buyer.accountId)).held === 0)
  open()
  expect(supplier.calls[0]!.finished).toBe(false)
  expect(await balances(stack, buyer.accountId)).toMatchObject({ held: 0, spent: 0 })
})
