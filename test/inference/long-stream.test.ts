// A stream that runs longer than the first-byte timeout: that timeout bounds the wait for the
// supplier's head and first frame only, never the stream itself.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { TestAccount } from '../helpers/accounts.ts'
import { balances, expectedCost, fundedBuyer, simOffer, sseData } from '../helpers/buyers.ts'
import { startStack, type TestStack } from '../helpers/stack.ts'

let stack: TestStack
let buyer: TestAccount

// 12 tokens at 10 a second: the stream lasts about 1.2 s, more than twice the 500 ms first-byte
// timeout, which the first frame meets even on a busy machine.
beforeAll(async () => {
  stack = await startStack({
    sim: { outputTokens: 12, tokensPerSecond: 10 },
    env: { SVC_FIRST_BYTE_TIMEOUT_MS: '500' },
  })
  await simOffer(stack, 40)
  buyer = await fundedBuyer(stack, '1.000000')
})
afterAll(() => stack.stop())

test('a stream longer than the first-byte timeout runs to [DONE] and is billed from its usage', async () => {
  const response = await fetch(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${buyer.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'llama-3.3-70b',
      messages: [{ role: 'user', content: 'Take your time.' }],
      stream: true,
    }),
  })
  expect(response.status).toBe(200)
  const frames = sseData(await response.text())
  const content = frames.filter(
    (f) =>
      typeof f === 'object' &&
      (f.choices as { delta?: { content?: string } }[] | undefined)?.[0]?.delta?.content,
  )
  expect(content).toHaveLength(12)
  expect(frames.at(-1)).toBe('[DONE]')
  const usage = frames.find((f) => typeof f === 'object' && f.usage) as {
    usage: { prompt_tokens: number; completion_tokens: number }
  }
  expect(usage.usage.completion_tokens).toBe(12)
  const cost = frames.find((f) => typeof f === 'object' && f.object === 'svc.cost') as { costUsdc: string }
  const charged = expectedCost(usage.usage, 40)
  expect(cost.costUsdc).toBe((charged / 1e6).toFixed(6))
  expect((await balances(stack, buyer.accountId)).spent).toBe(charged)
})
