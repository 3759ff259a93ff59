// openai-node's stream helpers on our streams: the usage chunk and the svc.cost frame carry the
// stream's own id, created and model, so the helpers keep one completion to the end.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { ChatCompletionStream } from 'openai/lib/ChatCompletionStream'
import type { TestAccount } from '../helpers/accounts.ts'
import { fundedBuyer, simOffer } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount
let client: OpenAI

beforeAll(async () => {
  stack = await startStack({ sim: { outputTokens: 6 } })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack)
  client = new OpenAI({ apiKey: buyer.apiKey, baseURL: `${stack.url}/v1`, maxRetries: 0 })
})
afterAll(() => stack.stop())

const request = {
  model: 'llama-3.3-70b',
  messages: [{ role: 'user' as const, content: 'stream to a browser' }],
  stream_options: { include_usage: true },
}

test('a stream proxied with toReadableStream / fromReadableStream ends with its one completion', async () => {
  const upstream = await client.chat.completions.create({ ...request, stream: true })
  const chunks: { id: string; created: number; model: string }[] = []
  const proxied = ChatCompletionStream.fromReadableStream(upstream.toReadableStream())
  proxied.on('chunk', (chunk) => chunks.push(chunk))
  const final = await proxied.finalChatCompletion()
  expect(final.choices).toHaveLength(1)
  expect(final.choices[0]!.message.content?.length).toBeGreaterThan(0)
  // Every chunk, the usage chunk and the cost frame included, names the same completion.
  expect(new Set(chunks.map((c) => c.id)).size).toBe(1)
  expect(new Set(chunks.map((c) => c.created)).size).toBe(1)
  expect(final.id).toBe(chunks[0]!.id)
  expect(final.model).toBe(chunks[0]!.model)
  expect(final.usage?.completion_tokens).toBe(6)
})

test('chat.completions.stream reports the content and the usage of the one completion', async () => {
  const runner = client.chat.completions.stream(request)
  const final = await runner.finalChatCompletion()
  expect(final.choices).toHaveLength(1)
  expect(final.usage?.completion_tokens).toBe(6)
  expect(await runner.finalContent()).toBe(final.choices[0]!.message.content)
})
