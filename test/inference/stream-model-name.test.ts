// A supplier names the model in its own words (a vendor path, a dated build). The buyer bought the
// gateway's model and is told so everywhere: the buffered answer says the catalog id, and so must
// every chunk of a stream (content, usage, svc.cost), whatever the supplier wrote in them, and the
// Responses and Messages streams' objects. Read through the real openai SDK.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI from 'openai'
import type { TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, postOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

const THEIRS = 'accounts/vendor/models/llama-v3p3-70b-instruct'
const OURS = 'llama-3.3-70b'
const USAGE = { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 }

let stack: TestStack
let buyer: TestAccount
let client: OpenAI
let supplier: ReturnType<typeof Bun.serve>

const chunk = (body: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-v', object: 'chat.completion.chunk', created: 1, model: THEIRS, ...body })}\n\n`

beforeAll(async () => {
  supplier = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const body = (await request.json()) as { stream?: boolean }
      if (!body.stream) {
        return Response.json({
          id: 'chatcmpl-v',
          object: 'chat.completion',
          created: 1,
          model: THEIRS,
          choices: [
            { index: 0, message: { role: 'assistant', content: 'one two three' }, finish_reason: 'stop' },
          ],
          usage: USAGE,
        })
      }
      const sse =
        chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'one' } }] }) +
        // Spaced as some servers write it: the name is still the supplier's.
        `data: {"id": "chatcmpl-v", "object": "chat.completion.chunk", "created": 1, "model": "${THEIRS}", "choices": [{"index": 0, "delta": {"content": " two"}}]}\n\n` +
        chunk({ choices: [{ index: 0, delta: { content: ' three' }, finish_reason: 'stop' }] }) +
        chunk({ choices: [], usage: USAGE }) +
        'data: [DONE]\n\n'
      return new Response(sse, { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  stack = await startStack({})
  await postOffer(stack, `http://127.0.0.1:${supplier.port}`, 40)
  buyer = await fundedBuyer(stack, '1.000000')
  client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
})
afterAll(async () => {
  await stack.stop()
  supplier.stop(true)
})

const messages = [{ role: 'user' as const, content: 'count' }]

test('a buffered answer names the gateway model, not the supplier', async () => {
  const completion = await client.chat.completions.create({ model: `svc/${OURS}`, messages })
  expect(completion.model).toBe(OURS)
})

test('every chunk of a chat stream names the gateway model, as the buffered answer does', async () => {
  const stream = await client.chat.completions.create({ model: `svc/${OURS}`, messages, stream: true })
  const chunks: Record<string, unknown>[] = []
  for await (const c of stream) chunks.push(c as unknown as Record<string, unknown>)
  const text = chunks
    .flatMap((c) => (c.choices as { delta?: { content?: string } }[]) ?? [])
    .map((c) => c.delta?.content ?? '')
    .join('')
  expect(text).toBe('one two three')
  // Content chunks, the usage chunk and the svc.cost frame.
  expect(chunks.at(-2)!.usage).toMatchObject(USAGE)
  expect(chunks.at(-1)!.object).toBe('svc.cost')
  expect(chunks.map((c) => c.model)).toEqual(chunks.map(() => OURS))
  // The SDK's own assembly of the stream says it too.
  const runner = client.chat.completions.stream({ model: OURS, messages })
  expect((await runner.finalChatCompletion()).model).toBe(OURS)
})

test('Responses and Messages streams name the gateway model', async () => {
  const events = await client.responses.create({ model: `svc/${OURS}`, input: 'count', stream: true })
  const models: unknown[] = []
  for await (const event of events) if ('response' in event) models.push(event.response.model)
  expect(models.length).toBeGreaterThan(1)
  expect(models).toEqual(models.map(() => OURS))
  const response = await fetch(`${stack.url}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': buyer.apiKey },
    body: JSON.stringify({ model: `svc/${OURS}`, max_tokens: 16, messages, stream: true }),
  })
  const start = sseData(await response.text()).find((f) => (f as { type?: string }).type === 'message_start')
  expect((start as { message: { model: string } }).message.model).toBe(OURS)
})
